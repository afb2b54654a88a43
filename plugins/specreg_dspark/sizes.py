"""What a resolved DSpark/DFlash config implies at run time: gamma, the widths, the layout.

Torch-free. `analyse_dspark` / `analyse_dflash` combine the parsed draft checkpoint
(`specreg_dspark.checkpoint`) with ``--speculative-num-draft-tokens`` into a `BlockRuntime` and
every problem, never raising; `resolve_runtime_config` raises them instead. `main_sizes`,
`candidate_sizes` and `max_candidate_gamma` state the per-phase widths of the main config and of
each adaptive candidate.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from specreg.errors import ConfigError, Problem, problem
from specreg.integers import is_int
from specreg.contract.phase import Phase
from specreg.contract.resolution import Sizes
from specreg_dspark.checkpoint import (
    DFlashDraftConfig,
    DSparkDraftConfig,
    Layout,
    parse_dflash_draft_config,
    parse_dspark_draft_config,
)

DEFAULT_DSPARK_GAMMA = 7
DEFAULT_DFLASH_BLOCK_SIZE = 16
_FLAG_N = "--speculative-num-draft-tokens"


def gamma_from_num_draft_tokens(num_draft_tokens: int) -> int:
    """gamma = num_draft_tokens - 1; below 2 draft tokens is SR300 (nothing to propose)."""
    prob = _num_draft_tokens_problem(num_draft_tokens)
    if prob is not None:
        raise ConfigError(prob)
    return int(num_draft_tokens) - 1


def _num_draft_tokens_problem(num_draft_tokens: Any, algorithm: str = "dspark") -> Problem | None:
    if is_int(num_draft_tokens) and num_draft_tokens >= 2:
        return None
    return problem(
        "SR300",
        f"{algorithm} num_draft_tokens must be >= 2 (= gamma + 1), got {num_draft_tokens!r}",
        accepted="num_draft_tokens >= 2 (gamma >= 1); 4 to 8 is typical",
        fix=f"set {_FLAG_N} to gamma + 1 (e.g. 8 for gamma 7), or leave it unset so gamma comes "
        "from the draft checkpoint; drop --speculative-algorithm to turn speculation off",
        field="num_draft_tokens",
    )


@attrs.frozen(kw_only=True)
class BlockRuntime:
    """What one resolved DSpark/DFlash config means at run time.

    ``num_draft_tokens`` (n) is the target verify width = gamma + 1; ``draft_width`` is the
    draft forward width (DSpark: gamma dense / gamma + 1 bonus-anchor; DFlash: the block it runs, n).
    """

    algorithm: str
    gamma: int
    num_draft_tokens: int
    draft_width: int
    layout: Layout = "dense"
    mask_token_id: int | None = None
    target_layer_ids: tuple[int, ...] | None = None
    markov_rank: int = 0
    markov_head_type: str | None = None

    @property
    def sample_from_anchor(self) -> bool:
        return self.layout == "dense"

    def widths(self, is_draft_worker: bool) -> dict[str, int]:
        """Per-request token width of each phase on one worker (see docs/plugins/dspark.md)."""
        return {
            "draft_decode": self.draft_width,
            "draft_extend": self.num_draft_tokens,
            "target_verify": self.draft_width if is_draft_worker else self.num_draft_tokens,
        }


def _no_checkpoint_notice(algorithm: str, used: str) -> Problem:
    return problem(
        "SR308",
        f"no draft checkpoint config was given for {algorithm}: {used}; mask_token_id, "
        "markov head and anchor layout are not checked (dense layout assumed)",
        accepted="a draft checkpoint (--speculative-draft-model-path FOLDER holding config.json)",
        fix="pass --speculative-draft-model-path FOLDER (the draft checkpoint) so gamma and the "
        "layout are checked",
        field="draft_config",
        severity="warning",
    )


def _mask_problems(algorithm: str, mask_token_id: int | None, vocab: int | None, where: str) -> list[Problem]:
    if mask_token_id is None:
        return [
            problem(
                "SR304",
                f"{algorithm} requires mask_token_id to be set in the draft model config",
                accepted="an integer in [0, target vocab size)",
                fix="add mask_token_id (or dspark_config.mask_token_id) to the draft config.json",
                field="mask_token_id",
            )
        ]
    if vocab is not None and mask_token_id >= vocab:
        return [
            problem(
                "SR304",
                f"{algorithm} mask_token_id={mask_token_id} ({where}) is outside the target vocab "
                f"size {vocab}",
                accepted=f"mask_token_id in [0, {vocab})",
                fix="use the checkpoint's mask/noise token id, or correct vocab_size / "
                "target_vocab_size in the draft config",
                field="mask_token_id",
            )
        ]
    return []


def analyse_dspark(
    draft_config: Mapping[str, Any] | None,
    num_draft_tokens: int | None,
    *,
    parsed: tuple[DSparkDraftConfig, list[Problem]] | None = None,
) -> tuple[BlockRuntime, list[Problem]]:
    """Resolve DSpark's gamma and widths; never raises. Returns the runtime (defaults where the
    inputs are invalid) and every problem (errors and warning notices)."""
    problems: list[Problem] = []
    cfg = DSparkDraftConfig()
    if draft_config is not None:  # `parsed`: the draft config parsed once by the caller
        cfg, found = parsed if parsed is not None else parse_dspark_draft_config(draft_config)
        problems += found
    ckpt_gamma = cfg.gamma
    if num_draft_tokens is not None:
        prob = _num_draft_tokens_problem(num_draft_tokens, "dspark")
        if prob is not None:
            problems.append(prob)
            gamma = max(int(num_draft_tokens) - 1, 0) if is_int(num_draft_tokens) else 0
        else:
            gamma = num_draft_tokens - 1
            if ckpt_gamma is not None and ckpt_gamma != gamma:
                where = cfg.sources.get("gamma", "block_size")
                problems.append(
                    problem(
                        "SR305",
                        f"DSpark gamma mismatch: {_FLAG_N} {num_draft_tokens} means gamma={gamma}, "
                        f"but the draft config's {where} gives gamma={ckpt_gamma} "
                        f"({cfg.layout} layout)",
                        accepted=f"{_FLAG_N} {ckpt_gamma + 1} (= gamma + 1), or unset",
                        fix=f"set {_FLAG_N} {ckpt_gamma + 1}, or leave it unset to use the "
                        "checkpoint's gamma; silently choosing one misreads every draft slot",
                        field="num_draft_tokens",
                    )
                )
    elif ckpt_gamma is not None:
        gamma = ckpt_gamma
    else:
        gamma = DEFAULT_DSPARK_GAMMA
        if draft_config is not None:
            problems.append(
                problem(
                    "SR309",
                    f"neither {_FLAG_N} nor the draft config's block_size sets gamma; using the "
                    f"default gamma {DEFAULT_DSPARK_GAMMA} ({_FLAG_N} {DEFAULT_DSPARK_GAMMA + 1})",
                    accepted=f"{_FLAG_N} >= 2, or block_size in the draft config",
                    fix=f"set {_FLAG_N} to gamma + 1 to choose gamma explicitly",
                    field="num_draft_tokens",
                    severity="warning",
                )
            )
    if draft_config is None and not any(p.code == "SR300" for p in problems):
        used = (
            f"gamma {gamma} from {_FLAG_N} {num_draft_tokens}"
            if num_draft_tokens is not None
            else f"the default gamma {DEFAULT_DSPARK_GAMMA}"
        )
        problems.append(_no_checkpoint_notice("dspark", used))
    elif draft_config is not None:
        if cfg.markov_rank <= 0 and not any(p.field == "markov_rank" for p in problems):
            problems.append(
                problem(
                    "SR303",
                    f"DSpark draft requires markov_rank > 0; got markov_rank={cfg.markov_rank} "
                    f"({cfg.sources.get('markov_rank', 'unset')})",
                    accepted="markov_rank >= 1 (the Markov head's rank), with markov_head_type",
                    fix="use a DSpark checkpoint (with markov_w1/markov_w2 and markov_rank), or "
                    "--speculative-algorithm dflash for a plain DFlash draft",
                    field="markov_rank",
                )
            )
        if not any(p.field == "mask_token_id" for p in problems):
            problems += _mask_problems(
                "DSpark",
                cfg.mask_token_id,
                cfg.target_vocab_size,
                cfg.sources.get("mask_token_id", "mask_token_id"),
            )
    runtime = BlockRuntime(
        algorithm="dspark",
        gamma=gamma,
        num_draft_tokens=gamma + 1,
        draft_width=cfg.draft_width(gamma),
        layout=cfg.layout,
        mask_token_id=cfg.mask_token_id,
        target_layer_ids=cfg.target_layer_ids,
        markov_rank=cfg.markov_rank,
        markov_head_type=cfg.markov_head_type,
    )
    return runtime, problems


def analyse_dflash(
    draft_config: Mapping[str, Any] | None,
    num_draft_tokens: int | None,
    *,
    parsed: tuple[DFlashDraftConfig, list[Problem]] | None = None,
) -> tuple[BlockRuntime, list[Problem]]:
    """Resolve DFlash's verify width and block size; never raises.

    One knob sets both, as SGLang 0.5.23's DFlash worker runs it: the block is n =
    ``num_draft_tokens`` when given (at most the checkpoint's ``block_size``, SR310), else the
    checkpoint's block size, else 16; the draft forward and the verify both span that block.
    """
    problems: list[Problem] = []
    cfg = DFlashDraftConfig()
    if draft_config is not None:  # `parsed`: the draft config parsed once by the caller
        cfg, found = parsed if parsed is not None else parse_dflash_draft_config(draft_config)
        problems += found
    block = cfg.block_size
    if num_draft_tokens is not None:
        prob = _num_draft_tokens_problem(num_draft_tokens, "dflash")
        if prob is not None:
            problems.append(prob)
        n = int(num_draft_tokens) if is_int(num_draft_tokens) else 0
        if block is None:
            block = max(n, 1)
        elif prob is None and n > block:
            problems.append(
                problem(
                    "SR310",
                    f"DFlash verify width {_FLAG_N} {n} exceeds the draft block size {block} "
                    f"({cfg.sources.get('block_size', 'block_size')})",
                    accepted=f"{_FLAG_N} in [2, {block}]",
                    fix=f"set {_FLAG_N} to at most {block}, or leave it unset to verify the whole "
                    "block",
                    field="num_draft_tokens",
                )
            )
    else:
        block = block if block is not None else DEFAULT_DFLASH_BLOCK_SIZE
        n = block
        if n < 2:
            problems.append(_num_draft_tokens_problem(n, "dflash"))  # type: ignore[arg-type]
    if draft_config is None and not any(p.code == "SR300" for p in problems):
        used = (
            f"block size {block} from {_FLAG_N} {num_draft_tokens}"
            if num_draft_tokens is not None
            else f"the default block size {DEFAULT_DFLASH_BLOCK_SIZE}"
        )
        problems.append(_no_checkpoint_notice("dflash", used))
    elif draft_config is not None and not any(p.field == "mask_token_id" for p in problems):
        problems += _mask_problems(
            "DFlash",
            cfg.mask_token_id,
            cfg.target_vocab_size,
            cfg.sources.get("mask_token_id", "mask_token_id"),
        )
    n = max(n, 0)
    runtime = BlockRuntime(
        algorithm="dflash",
        gamma=max(n - 1, 0),
        num_draft_tokens=n,
        draft_width=n,  # SGLang's DFlash worker: block_size = speculative_num_draft_tokens
        mask_token_id=cfg.mask_token_id,
        target_layer_ids=cfg.target_layer_ids,
    )
    return runtime, problems


def resolve_runtime_config(
    *, draft_config: Mapping[str, Any] | None, num_draft_tokens: int | None, algorithm: str = "dspark"
) -> BlockRuntime:
    """Like `analyse_dspark` / `analyse_dflash`, but raises one `ConfigError` listing the errors."""
    analyse = analyse_dspark if algorithm == "dspark" else analyse_dflash
    runtime, problems = analyse(draft_config, num_draft_tokens)
    errors = [p for p in problems if p.is_error]
    if errors:
        raise ConfigError(errors)
    return runtime


def max_candidate_gamma(runtime: BlockRuntime) -> int:
    """The most drafts one draft block holds: DSpark's gamma (its block is sized for it),
    DFlash's block (n) - 1."""
    return runtime.gamma if runtime.algorithm == "dspark" else max(runtime.draft_width - 1, 0)


def main_sizes(runtime: BlockRuntime) -> Sizes:
    """Sizes of the main config: its gamma and each phase's width on the target and draft
    workers."""
    return Sizes(
        gamma=runtime.gamma,
        target={Phase.parse(k): v for k, v in runtime.widths(False).items()},
        draft={Phase.parse(k): v for k, v in runtime.widths(True).items()},
    )


def candidate_sizes(runtime: BlockRuntime, gamma: int) -> Sizes:
    """Sizes of an adaptive candidate verifying `gamma` drafts of the main config's block."""
    n = gamma + 1
    return Sizes(
        gamma=gamma,
        target={Phase.DRAFT_DECODE: runtime.draft_width, Phase.DRAFT_EXTEND: n,
                Phase.TARGET_VERIFY: n},
        draft={Phase.DRAFT_DECODE: runtime.draft_width, Phase.DRAFT_EXTEND: n,
               Phase.TARGET_VERIFY: runtime.draft_width},
    )
