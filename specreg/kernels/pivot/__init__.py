"""The pivot search of the filters: each row's descending prefix down to a pivot, without a sort.

The filtering family (`specreg.kernels.filtering`) cuts top-k and top-p on a sorted prefix of
each row. This family finds that prefix from the row's column maxima (`torch_impl`): the rows
folded onto `PIVOT_COLUMNS` columns, a pivot L among the maxima that bounds the cut from below,
and only the columns reaching L gathered and ranked.

- `reference.prefix_reference`: the plain rule (test oracle): sort the row, keep what is >= L.
- `pivot_prefix`, `column_maxima`, `RowWeights` (`torch_impl`): the CPU implementation, called
  by the filtering family's `row_stats`; `binned_top_p_threshold`, the search a top-p row falls
  back to when its nucleus is longer than its prefix. Exported here, the family's entry: the
  filters call them directly (no wrapper checks their inputs). The Triton filter searches its
  pivots in registers instead (`specreg.kernels.filtering.triton_impl`).
"""

from specreg.kernels.pivot.torch_impl import (
    PIVOT_COLUMNS,
    RowWeights,
    binned_top_p_threshold,
    column_maxima,
    pivot_prefix,
)

__all__ = ["PIVOT_COLUMNS", "RowWeights", "binned_top_p_threshold", "column_maxima", "pivot_prefix"]
