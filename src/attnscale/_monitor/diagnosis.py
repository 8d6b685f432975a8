r"""Diagnosis: findings as a pure function of one call's statistics and the thresholds.

The scale rule follows what the code does, not how large the logits happen to
be: at initialisation the logits of most models are small whatever their
scale, so a missing or wrong scale would otherwise pass unnoticed until
training had already gone wrong.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

from .facts import FINDINGS, THRESHOLD_TABLE, THRESHOLDS
from .report import GUIDE_URL, SEVERITY_RANK, AttentionStats, Finding, Severity, compact

__all__ = [
    "DESIGNS",
    "GUIDE_PAGES",
    "THRESHOLDS",
    "compiled",
    "diagnose",
    "grouped",
    "no_attention",
]

#: The guide page (under the debugging section) that explains each finding code.
GUIDE_PAGES = {code: row.page for code, row in FINDINGS.items()}


#: Designs that ``expected_scale`` accepts by name: what each is, and its scale for head
#: size d.
DESIGNS: dict[str, tuple[str, Callable[[int], float]]] = {
    "mup": ("μP's 1/head_dim", lambda d: 1 / d),
    "deberta": ("DeBERTa's 1/√(3·head_dim)", lambda d: (3 * d) ** -0.5),
    "t5": ("T5's scale folded into the initialisation: 1 at run time", lambda d: 1.0),
}

_FP16_MAX = 65504.0
# folded initialisation is recognised from measured activation spreads, which are
# estimates: a factor of 2 tells sqrt(head_dim) (4 or more) apart from 1
_FOLD_TOLERANCE = 2.0
# q and k count as normalised per head when their row norms vary by less than this fraction
# of what rows of independent Gaussian entries give (1/sqrt(2 head_dim))
_NORMALISED = 0.1


#: The guide's page on attention over longer contexts, where length temperatures are measured.
SEQUENCE_LENGTH_PAGE = GUIDE_URL.replace("05_debugging/", "02_softmax/plot_05_sequence_length/")


def _error_level(name: str, th: Mapping[str, float]) -> float:
    """Where threshold ``name``'s finding turns into an error (its table row's escalation)."""
    factor = THRESHOLD_TABLE[name].error_at
    assert factor is not None
    return th[name] * factor


def _link(code: str) -> str:
    return f"See {GUIDE_URL}{GUIDE_PAGES[code]}"


def _near(x: float, y: float) -> bool:
    return abs(math.log(x / y)) < math.log(1.1)


def _layer_index(where: str) -> int | None:
    """The last numeric component of a module path (``h.3.attn`` -> 3), if it numbers layers.

    A number in a list of heads (``heads.1``) numbers heads, not layers.
    """
    parts = where.split("#")[0].split(".")
    numbers = [i for i, part in enumerate(parts) if part.isdigit()]
    if not numbers or (numbers[-1] > 0 and "head" in parts[numbers[-1] - 1].lower()):
        return None
    return int(parts[numbers[-1]])


def likely_causes(ratio: float, head_dim: int, num_heads: int | None, where: str) -> list[str]:
    """Sentences naming what produces ``ratio`` = scale x sqrt(head_dim), most specific first."""
    causes = []
    if _near(ratio, math.sqrt(head_dim)):
        causes.append("no scale at all: q·kᵀ reaches the softmax unscaled")
    if _near(ratio, head_dim):
        causes.append(
            "an inverted scale: the scores are multiplied by √head_dim where they should be "
            "divided by it (e.g. divided by a scale that already is 1/√head_dim)"
        )
    if _near(ratio, 1 / math.sqrt(head_dim)):
        causes.append(
            "double scaling: 1/√head_dim is applied twice, once to q (or k) and once "
            "to the product, for a total of 1/head_dim"
        )
        causes.append("the square root left out: the scores are divided by head_dim, not √head_dim")
    if num_heads and num_heads > 1 and _near(ratio, 1 / math.sqrt(num_heads)):
        causes.append(
            f"the scores are divided by √d_model = √({num_heads}·{head_dim}) instead of √head_dim"
        )
    layer = _layer_index(where)
    if layer is not None and layer > 0 and _near(ratio, 1 / (layer + 1)):
        causes.append(
            f"an extra factor 1/(layer index + 1) = 1/{layer + 1}, as GPT-2's "
            "scale_attn_by_inverse_layer_idx applies on purpose"
        )
    if not causes:
        divisor = head_dim / ratio**2
        causes.append(
            f"the scores are divided by √{divisor:.4g} instead of √{head_dim}: the scale is "
            "computed from another size than the head's, e.g. a query_pre_attn_scalar "
            "(Gemma) or a config head_dim that differs from hidden_size/num_heads"
        )
    return causes


def _scale_findings(
    site: str,
    where: str,
    s: AttentionStats,
    th: Mapping[str, float],
    expected: float | None,
    declared_by: str = "with expected_scale",
) -> list[Finding]:
    if s.scale is None or not s.head_dim or s.scale <= 0 or not math.isfinite(s.scale):
        return []
    tol = th["scale_ratio"]
    ratio, read = _reading(s, tol)
    if s.scale_range is not None and expected is None:
        temperature = _length_temperature(where, s, tol)
        if temperature is not None:
            return temperature
    if expected is not None:
        return _declared(where, s, ratio, read, tol, expected, declared_by)
    bounded = _bounded(where, s, ratio, read, tol)
    if bounded is not None:
        return bounded
    if 1 / tol <= ratio <= tol:
        return []
    if s.scale_learned:
        return [
            Finding(
                "scale-mismatch",
                "info",
                where,
                f"{read} The scale is learned (a temperature computed from a parameter), so it "
                f"is a design, not a bug; watch the logit spread as it trains. "
                f"{_link('scale-mismatch')}",
            )
        ]
    folded = _folded(s, ratio)
    if folded is not None:
        return [Finding("scale-mismatch", "info", where, f"{read} {folded}")]
    return [_mismatch(site, where, s, th, ratio, read)]


def _length_temperature(where: str, s: AttentionStats, tol: float) -> list[Finding] | None:
    """A scale that grows with the query position from 1/√head_dim: a length temperature, by
    design (None where the smallest scale is not 1/√head_dim: then it is read as any scale)."""
    assert s.scale_range is not None and s.head_dim
    low, high = (x * math.sqrt(s.head_dim) for x in s.scale_range)
    if not 1 / tol <= low <= tol:
        return None
    return [
        Finding(
            "scale-mismatch",
            "info",
            where,
            f"The scores are multiplied by a factor that changes with the query position, "
            f"from {low:.3g} to {high:.3g} × 1/√head_dim for head_dim {s.head_dim} "
            f"({s.scale_source}). This is a length temperature (Llama 4's "
            f"attn_temperature_tuning on its NoPE layers, scalable softmax): it sharpens the "
            f"softmax as the context grows, so that attention does not spread thinner over "
            f"more keys. A design, not a bug. See {SEQUENCE_LENGTH_PAGE}",
        )
    ]


def _reading(s: AttentionStats, tol: float) -> tuple[float, str]:
    """The scale as a ratio to 1/√head_dim (the worst head's, for per-head scales), in words."""
    assert s.scale is not None and s.head_dim
    reference = 1 / math.sqrt(s.head_dim)
    if s.scale_per_head:
        ratios = [h / reference for h in s.scale_per_head]
        off = [(i, r) for i, r in enumerate(ratios) if not 1 / tol <= r <= tol]
        worst = max(ratios, key=lambda r: abs(math.log(r)) if r > 0 else math.inf)
        listed = ", ".join(f"head {i}: {r:.3g}" for i, r in off) or "none"
        return worst, (
            f"The scores are multiplied by a different factor in each head ({s.scale_source}); "
            f"as multiples of 1/√head_dim for head_dim {s.head_dim}, the heads off it are "
            f"{listed}."
        )
    ratio = s.scale / reference
    return ratio, (
        f"The scores are multiplied by {s.scale:.4g} ({s.scale_source}), "
        f"{ratio:.3g} × 1/√head_dim for head_dim {s.head_dim}."
    )


def _bounded(
    where: str, s: AttentionStats, ratio: float, read: str, tol: float
) -> list[Finding] | None:
    """For q and k normalised per head, the check is the logit bound; None otherwise."""
    d, cv, bound, n = s.head_dim, s.qk_norm_cv, s.logit_bound, s.keys
    if not d or cv is None or bound is None or not n or cv >= _NORMALISED / math.sqrt(2 * d):
        return None
    top = 1 / (1 + (n - 1) * math.exp(-2 * bound))  # the most one key can take of a row
    measured = (
        f"q and k are normalised per head (their row norms vary by {100 * cv:.2g}%), so the "
        f"scale sets the range of the logits: every logit lies within ±{bound:.3g}, which "
        f"lets one of {n} keys take at most {top:.3g} of a row."
    )
    if top < 0.5:
        return [
            Finding(
                "scale-mismatch",
                "warning",
                where,
                f"{read} {measured} That bound is too tight for attention to concentrate on "
                f"any key. {_raise_bound(s)} {_link('scale-mismatch')}",
            )
        ]
    if 1 / tol <= ratio <= tol:
        return []
    return [
        Finding(
            "scale-mismatch",
            "info",
            where,
            f"{read} {measured} This is a normalised design (QK-norm, cosine attention): its "
            f"check is that bound, not 1/√head_dim. If a scale other than this one was "
            f"intended, declare it with AttentionMonitor(expected_scale=...). "
            f"{_link('scale-mismatch')}",
        )
    ]


def _raise_bound(s: AttentionStats) -> str:
    """What widens a normalised design's logit bound, given what in it is learned already."""
    if s.qk_gain_learned:
        return (
            "q and k are multiplied by learned per-dimension gains, which training can grow; "
            "if the bound stays this tight as it trains, start the gains (or the scale) higher."
        )
    if s.scale_learned:
        return "The scale is learned: if it stays this low as it trains, start it higher."
    return "Raise the scale, or make it learnable (as cosine attention's temperature)."


def _declared(
    where: str,
    s: AttentionStats,
    ratio: float,
    read: str,
    tol: float,
    expected: float,
    declared_by: str,
) -> list[Finding]:
    """Findings for a scale the user declared with ``expected_scale``."""
    assert s.scale is not None
    link = _link("scale-mismatch")
    off = s.scale / expected
    if 1 / tol <= off <= tol:
        if 1 / tol <= ratio <= tol:
            return []
        return [
            Finding(
                "scale-mismatch",
                "info",
                where,
                f"{read} This is the scale declared {declared_by}: {expected:.4g}, so it is "
                f"treated as intended. {link}",
            )
        ]
    direction = "larger" if off > 1 else "smaller"
    return [
        Finding(
            "scale-mismatch",
            "warning",
            where,
            f"{read} That is {off:.3g} times the scale declared {declared_by}, "
            f"{expected:.4g}: the code applies a scale {direction} than declared. Check every "
            f"place the scores, q or k are multiplied. {link}",
        )
    ]


def _folded(s: AttentionStats, ratio: float) -> str | None:
    """The explanation, when the missing factor is folded into the initialisation (T5)."""
    if s.q_std is None or s.k_std is None or s.k_std <= 0:
        return None
    if not s.k_std > _FOLD_TOLERANCE * s.q_std:  # the queries really are much smaller
        return None
    if not 1 / _FOLD_TOLERANCE <= ratio * s.q_std / s.k_std <= _FOLD_TOLERANCE:
        return None
    return (
        f"The factor is folded into the initialisation, as in T5: the queries are "
        f"{s.k_std / s.q_std:.3g} times smaller than the keys (std {s.q_std:.3g} against "
        f"{s.k_std:.3g}), which makes up for the missing 1/√head_dim at the start. Training "
        f"does not keep that balance: watch the logit spread. {_link('scale-mismatch')}"
    )


def _mismatch(
    site: str, where: str, s: AttentionStats, th: Mapping[str, float], ratio: float, read: str
) -> Finding:
    assert s.head_dim
    causes = "; or ".join(likely_causes(ratio, s.head_dim, s.num_heads, site))
    if ratio > th["scale_ratio"]:
        effect = (
            "Logits come out wider than 1/√head_dim intends, so attention is sharper "
            "than designed and training pushes the softmax into saturation sooner."
        )
    else:
        effect = (
            "Logits come out compressed, so attention stays close to uniform until the "
            "q and k weights grow to make up for it."
        )
    severity: Severity = "warning"
    if ratio > th["scale_ratio"] and s.logit_std > th["max_logit_std"]:
        severity = "error"
        effect += f" The measured within-row logit std is already {s.logit_std:.3g}."
    return Finding(
        "scale-mismatch",
        severity,
        where,
        f"{read} Likely cause: {causes}. {effect} Fix: multiply q·kᵀ by 1/√head_dim "
        f"exactly once; if this scale is intended, declare it with "
        f"AttentionMonitor(expected_scale=...). {_link('scale-mismatch')}",
    )


def diagnose(
    where: str,
    s: AttentionStats,
    thresholds: Mapping[str, float],
    expected_scale: float | None = None,
    *,
    declared_by: str = "with expected_scale",
) -> list[Finding]:
    """Return the findings for one call's statistics.

    Parameters
    ----------
    where : str
        The call site, used in the findings and to recognise a layer index.
    s : AttentionStats
        The statistics of one call.
    thresholds : Mapping[str, float]
        Every key of [THRESHOLDS][attnscale.THRESHOLDS].
    expected_scale : float, optional
        The scale the user declared for this site, if any.
    declared_by : str
        Who declared it, in words, for the message.
    """
    out = [
        *_nonfinite_findings(where, s),
        *_mask_findings(where, s, thresholds),
        *_fp16_findings(where, s, thresholds),
        *_scale_findings(where, where, s, thresholds, expected_scale, declared_by),
        *_sharpness_findings(where, s, thresholds),
    ]
    return [dataclasses.replace(f, step=s.step) for f in out]


def _nonfinite_findings(where: str, s: AttentionStats) -> list[Finding]:
    if not (s.nonfinite_logits or s.nonfinite_outputs or s.nonfinite_inputs):
        return []
    if s.nonfinite_inputs:
        what = (
            f"Measured {s.nonfinite_inputs} NaN or infinite entries in q and k (sampled rows), "
            f"before the product: the attention did not make them, something before it did. "
            f"Find the first layer whose input is not finite (the model's input, an embedding, "
            f"a division by zero, diverged weights)."
        )
    else:
        cause = (
            "overflow of QKᵀ in half precision or exploding activations; scale q before the "
            "product, or compute the scores in float32"
            if s.dtype in ("float16", "bfloat16")
            else f"exploding activations or diverged weights ({s.dtype} overflows only near "
            f"3e38), or a division by zero on the way to the scores"
        )
        what = (
            f"Measured {s.nonfinite_logits} NaN or +inf logits, and {s.nonfinite_outputs} "
            f"query rows with a valid key whose attention output is not finite ({s.dtype}). "
            f"NaN spreads to every output and gradient it touches. Look for {cause}."
        )
    return [Finding("non-finite", "error", where, f"{what} {_link('non-finite')}")]


def _mask_findings(where: str, s: AttentionStats, th: Mapping[str, float]) -> list[Finding]:
    out = []
    overflowed = s.max_abs_qk is not None and not math.isfinite(s.max_abs_qk)
    if s.masked_rows and not overflowed:  # after an overflow, -inf is no mask
        bad = s.masked_rows_nonfinite
        consequence = (
            "A softmax over nothing is 0/0: that NaN reaches the loss unless the row is "
            "dropped. Give every query at least one key, or zero those rows after the attention."
            if bad
            else "Their outputs are finite (SDPA returns zeros for such rows, and a finite "
            "mask value makes them uniform); this is normal for padding queries, whose "
            "outputs are unused."
        )
        out.append(
            Finding(
                "masked-rows",
                "error" if bad else "info",
                where,
                f"{s.masked_rows} sampled query rows have no valid key at all (the first at "
                f"index {s.first_masked_row}, as (batch, head, row)); {bad} of them give a "
                f"non-finite output. {consequence} {_link('masked-rows')}",
            )
        )
    if s.mask_leak > th["mask_leak"]:
        out.append(
            Finding(
                "leaky-mask",
                "warning",
                where,
                f"Masked keys still receive up to {100 * s.mask_leak:.3g}% of a row's "
                f"probability: the mask's value is too small against logits of this size "
                f"(max |logit| {s.max_abs_logit:.3g}), so the masked positions leak into the "
                f"output. Mask with -inf or torch.finfo(dtype).min, or with a boolean mask. "
                f"{_link('leaky-mask')}",
            )
        )
    return out


def _fp16_findings(where: str, s: AttentionStats, th: Mapping[str, float]) -> list[Finding]:
    if s.dtype != "float16" or s.max_abs_qk is None:
        return []
    reach = s.max_abs_qk / _FP16_MAX
    if reach < 1 / th["fp16_headroom"]:
        return []
    fused = s.path.startswith(("sdpa", "multihead_attention"))  # it is already SDPA
    fix = (
        ""
        if fused
        else "Multiply q by the scale before QKᵀ (or use F.scaled_dot_product_attention). "
    )
    return [
        Finding(
            "fp16-overflow-risk",
            "error" if reach >= 1 else "warning",
            where,
            f"Measured max |q·k| before scaling = {s.max_abs_qk:.4g}, {reach:.2g} of "
            f"the float16 maximum 65504. Beyond it the product becomes inf and the "
            f"softmax NaN. {fix}Compute the scores in float32 or bfloat16, or "
            f"normalise q and k. {_link('fp16-overflow-risk')}",
        )
    ]


def _sharpness_findings(where: str, s: AttentionStats, th: Mapping[str, float]) -> list[Finding]:
    """Large logits and entropy collapse."""
    out = []
    big, sat = th["large_logit_std"], th["saturated_fraction"]
    peak, head = _peak_head(s)
    saturated = _unstructured_saturation(s, th)
    # a wide spread with no saturated row is no collapse (a mask read as logits, say)
    wide = s.logit_std > big and saturated > 0
    spread = math.isfinite(s.logit_std) and (wide or saturated > sat)
    if spread or peak > th["max_logit"]:
        severe = spread and (
            s.logit_std > _error_level("large_logit_std", th)
            or saturated > min(_error_level("saturated_fraction", th), 0.9)
        )
        out.append(
            Finding(
                "large-logits",
                "error" if severe else "warning",
                where,
                f"{_large_logits_rules(s, th, saturated, spread, (peak, head))}Measured "
                f"within-row logit std {s.logit_std:.3g}, max |logit| "
                f"{s.max_abs_logit:.3g}, and {100 * saturated:.3g}% of the rows "
                f"with two or more keys have a max probability above {th['saturation']}. "
                f"The softmax is in its collapse region: saturated rows pass almost no "
                f"gradient, and small input changes flip the chosen key. Check the scale; if "
                f"the loss is unstable too, add QK-LayerNorm or a logit soft-cap, or lower the "
                f"learning rate. "
                f"{_link('large-logits')}",
            )
        )
    return out + _entropy_findings(where, s, th)


def _large_logits_rules(
    s: AttentionStats,
    th: Mapping[str, float],
    saturated: float,
    spread: bool,
    peak_head: tuple[float, int | None],
) -> str:
    """Which of large-logits' rules fired, one sentence each: the rows (saturated ones, or a
    wide spread with some saturating) and the peak logit of a head over every row."""
    peak, head = peak_head
    rules = []
    if spread and saturated > th["saturated_fraction"]:
        rules.append(
            f"Saturated rows fired this: {100 * saturated:.3g}% of the rows, above the "
            f"saturated_fraction threshold of {100 * th['saturated_fraction']:.3g}%. "
        )
    elif spread:
        rules.append(
            f"The logit spread fired this: a within-row std of {s.logit_std:.3g}, above the "
            f"large_logit_std threshold of {th['large_logit_std']:.3g}, with saturated rows. "
        )
    if head is not None and peak > th["max_logit"]:
        rules.append(
            f"The peak logit fired this: the largest logit of head {head} over every query "
            f"row is {peak:.3g}, above the max_logit threshold of {th['max_logit']:.3g} "
            f"(QK-Clip would scale this head's logits by {th['max_logit'] / peak:.3g}). "
        )
    return "".join(rules)


def _unstructured_saturation(s: AttentionStats, th: Mapping[str, float]) -> float:
    """The share of saturated rows outside the positional heads: a previous-token head is
    sharp by design, and its one-hot rows are not large logits. A sink head's rows count: a
    scale too large makes heads park on one key too (RoBERTa with q·k times 16 does)."""
    per_head, shares = s.head_saturated_fraction, s.head_positional_share
    if per_head is None or shares is None or len(per_head) != len(shares):
        return s.saturated_fraction
    kept = [
        f
        for f, share in zip(per_head, shares, strict=True)
        if math.isfinite(f) and not (math.isfinite(share) and share >= th["positional_share"])
    ]
    return sum(kept) / len(kept) if kept else 0.0


def _entropy_findings(where: str, s: AttentionStats, th: Mapping[str, float]) -> list[Finding]:
    """Attention sinks, and entropy collapse in the heads that are neither positional nor
    sinks whose rest (each row without the sink) keeps its entropy."""
    out = []
    ent = th["normalized_entropy"]
    heads = _read_heads(s, th)
    if heads.sinks:
        out.append(
            Finding(
                "attention-sink",
                "info",
                where,
                f"{len(heads.sinks)} head(s) put most of their weight on one key "
                f"({_heads_and_weights(heads.sinks)}; mean weight per head) "
                f"(threshold sink_weight {th['sink_weight']:.2g}): attention sinks (Xiao et al. "
                f"2023, arXiv:2309.17453), a pattern trained models learn to park the mass a "
                f"head does not need, on the first token or on a delimiter. Their entropy is "
                f"low by construction, so their collapse check reads the rest of each row: "
                f"the weight off the sink, renormalised. {_link('attention-sink')}",
            )
        )
    lowest = heads.lowest
    if math.isfinite(lowest) and lowest < ent:
        if heads.lowest_sink is None:
            measured = (
                f"Measured entropy down to {lowest:.3g} of log(n) in a head (mean over heads "
                f"{s.normalized_entropy:.3g}; mean max probability {s.max_probability:.3g}): "
                f"rows are near one-hot."
            )
        else:
            head, key = heads.lowest_sink
            measured = (
                f"Measured entropy down to {lowest:.3g} of log(n - 1) in head {head} with its "
                f"sink on key {key} left out (mean over heads {s.normalized_entropy:.3g}; mean "
                f"max probability {s.max_probability:.3g}): what the sink leaves of each row "
                f"goes to one key."
            )
        out.append(
            Finding(
                "entropy-collapse",
                "error" if lowest < _error_level("normalized_entropy", th) else "warning",
                where,
                f"{measured} Entropy collapse goes with "
                f"unstable training (Zhai et al. 2023, arXiv:2303.06296) unless the task "
                f"really wants one-hot attention. Check the scale; if the loss is unstable "
                f"too, lower the learning rate, or add QK-LayerNorm or σReparam. "
                f"{_link('entropy-collapse')}",
            )
        )
    return out


def _heads_and_weights(sinks: list[tuple[int, float, int]], most: int = 6) -> str:
    """'head 0: 0.91 on key 0, head 3: 0.88 on key 5' for the first ``most`` sinks, then how
    many more."""
    shown = ", ".join(f"head {h}: {w:.2g} on key {k}" for h, w, k in sinks[:most])
    return shown + (f" and {len(sinks) - most} more" if len(sinks) > most else "")


@dataclasses.dataclass(frozen=True)
class _Heads:
    """What the entropy-collapse check reads of a call's heads."""

    lowest: float  # the lowest entropy among the heads checked (inf: none)
    lowest_sink: tuple[int, int] | None  # (head, sink key) where that is a sink's rest
    sinks: list[tuple[int, float, int]]  # (head, mean weight on its sink key, the key)
    positional: list[int]  # heads left out because their rows look at a fixed offset


def _read_heads(s: AttentionStats, th: Mapping[str, float]) -> _Heads:
    """Per head: a sink (mean weight on its sink key at least ``sink_weight``) is checked on
    the entropy of its rest, a positional head (at least ``positional_share`` of its rows at
    one offset) is not checked, any other on its entropy. Without per-head numbers, the
    minimum over heads. A head whose structure was not read (too few rows), or a report from
    before sink keys were measured, reads its first-key weight: a sink on key 0 is left out
    of the check."""
    entropies = s.head_normalized_entropy
    if entropies is None:
        return _Heads(s.min_head_normalized_entropy, None, [], [])
    n = len(entropies)
    weights, keys, rest = s.head_sink_weight, s.head_sink_key, s.head_rest_entropy
    if weights is None or keys is None or rest is None:
        weights, keys = s.head_first_key_weight or (math.nan,) * n, (0.0,) * n
        rest = (math.nan,) * n
    share = s.head_positional_share or (math.nan,) * n
    firsts = s.head_first_key_weight or (math.nan,) * n
    if not len(weights) == len(keys) == len(rest) == len(share) == len(firsts) == n:
        return _Heads(s.min_head_normalized_entropy, None, [], [])
    sinks: list[tuple[int, float, int]] = []
    positional: list[int] = []
    checked: list[tuple[float, tuple[int, int] | None]] = []
    for h in range(n):
        weight, key, rest_h = weights[h], keys[h], rest[h]
        if not math.isfinite(weight):  # no structure read: the first key, as it always was
            weight, key, rest_h = firsts[h], 0.0, math.nan
        sink = math.isfinite(weight) and weight >= th["sink_weight"]
        if sink:
            sinks.append((h, weight, int(key)))
        if math.isfinite(share[h]) and share[h] >= th["positional_share"]:
            positional.append(h)
        elif sink and math.isfinite(rest_h):  # NaN: no rest to measure (all sink)
            checked.append((rest_h, (h, int(key))))
        elif not sink and math.isfinite(entropies[h]):
            checked.append((entropies[h], None))
    lowest, where = min(checked, key=lambda c: c[0], default=(math.inf, None))
    return _Heads(lowest, where, sinks, positional)


def _peak_head(s: AttentionStats) -> tuple[float, int | None]:
    """The largest per-head max logit and its head, where every row was measured."""
    if s.heads is None:
        return -math.inf, None
    peaks = [(v, h) for h, v in enumerate(s.heads["max_logit"]) if v is not None]
    peaks = [(v, h) for v, h in peaks if math.isfinite(v)]
    return max(peaks) if peaks else (-math.inf, None)


def no_attention(unmatched_softmax: int) -> Finding:
    """The finding for a monitored block in which no attention was measured."""
    if unmatched_softmax:
        why = (
            f"{unmatched_softmax} softmax calls over a last axis were seen, but none over "
            "a product of two activations (q·kᵀ), so none could be read as attention. The "
            "scores may come from a kernel the monitor cannot see into (FlashAttention, "
            "xformers, a custom CUDA op), or through operations it does not follow."
        )
    else:
        why = (
            "Neither F.scaled_dot_product_attention, nn.MultiheadAttention, "
            "nn.TransformerEncoderLayer nor a softmax over a q·kᵀ product ran inside the "
            "with-block for the monitored model. Check that the model ran inside the block, "
            "and that the model given to the monitor is the one that ran; or the attention "
            "ran where the monitor cannot see: compiled code (torch.compile; FlexAttention "
            "is the one path read there), or a kernel (FlashAttention, xformers)."
        )
    return Finding(
        "no-attention",
        "warning",
        "-",
        f"No attention was measured, so this report cannot vouch for anything. {why} "
        f"{_link('no-attention')}",
    )


def compiled(where: str, calls: int) -> Finding:
    """The finding for a ``torch.compile``d module that ran inside the monitored block."""
    return Finding(
        "compiled",
        "warning",
        where,
        f"{calls} call(s) ran compiled (torch.compile), and no attention was measured "
        f"inside: the model ran unchanged, but the monitor cannot see into compiled kernels "
        f"(the default inductor backend). To measure it, run the uncompiled module inside the block (for "
        f"cm = torch.compile(model), run model, or cm._orig_mod) for a step or two, then "
        f"train compiled. {_link('compiled')}",
    )


def grouped(findings: list[tuple[Finding, AttentionStats]]) -> list[Finding]:
    """One finding per bug: the findings of every site, grouped.

    A scale mismatch groups with the sites whose scale, head size and way of reading the
    scale are the same (the same bug, repeated layer after layer); any other code groups
    with every site of that code. The group takes the highest severity among its sites and
    quotes the statistics of the first site at that severity.
    """
    groups: dict[tuple[object, ...], list[Finding]] = {}
    for f, s in findings:
        key: tuple[object, ...] = (f.code,)
        if f.code == "scale-mismatch":
            key += (f"{s.scale:.4g}", s.head_dim, s.scale_source, f.severity == "info")
        groups.setdefault(key, []).append(f)
    out = []
    for members in groups.values():
        top = max(SEVERITY_RANK[f.severity] for f in members)
        lead = next(f for f in members if SEVERITY_RANK[f.severity] == top)
        sites = tuple(dict.fromkeys(f.where for f in members))
        message = lead.message
        if len(sites) > 1:
            message = f"Seen at {len(sites)} sites ({compact(sites)}); at {lead.where}: {message}"
        firsts = [f.first_step for f in members if f.first_step is not None]
        first_step = min(firsts) if firsts else None
        out.append(dataclasses.replace(lead, message=message, sites=sites, first_step=first_step))
    return out
