"""The pivot search of the filters: each row's descending prefix down to a pivot, without a sort.

The filtering family (`specreg.kernels.filtering`) cuts top-k and top-p on a sorted prefix of
each row. This family finds that prefix from the row's column maxima (`torch_impl`): the rows
folded onto `PIVOT_COLUMNS` columns, a pivot L among the maxima that bounds the cut from below,
and only the columns reaching L gathered and ranked.

- `reference.prefix_reference`: the plain rule (test oracle): sort the row, keep what is >= L.
- `torch_impl.pivot_prefix`, `column_maxima`, `RowWeights`: the CPU implementation, called by
  `specreg.kernels.filtering.torch_impl.row_stats`; `torch_impl.binned_top_p_threshold`, the
  search a top-p row falls back to when its nucleus is longer than its prefix. The Triton filter searches its pivots in
  registers instead (`specreg.kernels.filtering.triton_impl`).
"""
