r"""Executable checks of the source article's claims: site-only, no stability promise.

The site began from a tutorial on the $1/\sqrt{d_k}$ factor whose claims are a
mix of true, half-true and false. Each function here re-measures one claim and
returns a ``ClaimCheck`` whose verdict follows from the measurement by a stated
rule, so the fact-check page cannot drift from the code and a test fails when a
verdict changes. Only the fact-check page and its test use this module; it is not
part of attnscale's public API, and its names, signatures and behaviour may change
in any release.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnscale import _checks
from attnscale._sampling import sample_scores, variance_estimate
from attnscale._softmax import softmax_entropy, softmax_jacobian_norm, tempered_softmax
from attnscale._theory import init_projection_variance

from . import experiments

__all__ = ["PAGE_TITLES", "VERDICTS", "ClaimCheck", "check_claims"]

#: The verdicts a check can return. "holds, negligible": the measurement confirms the claimed
#: direction (its 95% interval excludes zero), but the effect is too small to matter.
VERDICTS = ("holds", "holds, negligible", "holds only partly", "false")


@dataclass(frozen=True)
class ClaimCheck:
    """The outcome of re-measuring one claim of the source article.

    Attributes
    ----------
    section : str
        Section of the article, e.g. ``"2.1"``.
    claim : str
        The claim, in our words.
    verdict : str
        One of ``VERDICTS``.
    evidence : str
        What was measured, with the numbers, in one or two sentences. Math in
        ``claim`` and ``evidence`` uses ``\\( \\)`` delimiters, so it renders inside
        HTML tables.
    rule : str
        How the verdict follows from the measurement.
    page : str
        Path of the guide page that examines the claim, relative to the site root.
    numbers : dict[str, float]
        The measured values behind ``evidence``.
    """

    section: str
    claim: str
    verdict: str
    evidence: str
    rule: str
    page: str
    numbers: dict[str, float] = field(default_factory=dict)


_GALLERY = "generated/gallery/"

#: The title of every guide page a claim links to (the page's own heading), by ``page``.
PAGE_TITLES: dict[str, str] = {
    _GALLERY + "01_variance/plot_01_variance_growth/": "The variance of q·k grows with d_k",
    _GALLERY + "01_variance/plot_02_beyond_assumptions/": "Beyond the textbook assumptions",
    _GALLERY + "02_softmax/plot_01_shift_vs_scale/": (
        "Shift versus scale: what actually sharpens a softmax"
    ),
    _GALLERY + "02_softmax/plot_03_softmax_gradient/": (
        "The gradient through softmax: rise, peak, collapse"
    ),
    _GALLERY + "03_normalization/plot_04_comparison_table/": (
        "The comparison table: 1/√d_k against every fix in real use"
    ),
    _GALLERY + "03_normalization/plot_02_weight_growth/": (
        "Under weight growth: which strategies bound the logits?"
    ),
    _GALLERY + "04_training/plot_01_article_experiment/": (
        "The article's experiment, reproduced over seeds"
    ),
    _GALLERY + "05_debugging/plot_05_checklist/": "The checklist",
}


def _fraction_inside_gaussian(d_k: int, a: float) -> float:
    """P(|q . k| <= a) for q, k with independent standard-normal coordinates, exactly.

    q . k has the law of R z with R^2 ~ chi^2(d_k) and z ~ N(0, 1) independent, so the
    fraction is E[erf(a / (R sqrt 2))], integrated over chi^2(d_k) on a grid of +-14 standard
    deviations (for d_k >= 4, where the density is finite at the grid's lower end).
    """
    sd = math.sqrt(2 * d_k)
    u = torch.linspace(max(d_k - 14 * sd, 1e-9), d_k + 14 * sd, 40_001, dtype=torch.float64)
    log_density = (d_k / 2 - 1) * torch.log(u) - u / 2  # chi^2(d_k), up to a constant
    weight = torch.exp(log_density - log_density.max())  # normalised below
    inside = torch.special.erf(a / torch.sqrt(2 * u))
    return (torch.trapezoid(weight * inside, u) / torch.trapezoid(weight, u)).item()


def _check_1_1(gen: torch.Generator) -> ClaimCheck:
    # "Scores lie in [-a, a]" describes where the distribution's mass is; the extremes of a
    # sample grow with its size (about sqrt(2 ln n) standard deviations), so a rule on them
    # would be decided by how many scores one draws. The rule is on the fraction inside.
    d_k, n = 1024, 100_000
    raw = sample_scores(d_k, n, method="chi", generator=gen)  # exact in distribution
    scaled = raw / math.sqrt(d_k)
    inside = {"raw": raw.abs() <= 100, "scaled": scaled.abs() <= 3}
    nums: dict[str, float] = {}
    for name, ok in inside.items():
        frac = ok.double().mean().item()
        half = 1.96 * math.sqrt(frac * (1 - frac) / n)  # normal approximation of the binomial
        nums |= {f"{name}_inside": frac, f"{name}_low": frac - half, f"{name}_high": frac + half}
    # The reference values: exact for Gaussian coordinates (the article draws torch.randn), and
    # under the normal approximation q.k ~ N(0, d_k). They differ because q.k is not normal:
    # each q_i k_i has kurtosis 9 (excess 6), so the sum of d_k of them has excess kurtosis 6/d_k.
    nums["raw_exact"] = _fraction_inside_gaussian(d_k, 100.0)
    nums["scaled_exact"] = _fraction_inside_gaussian(d_k, 3 * math.sqrt(d_k))
    nums["raw_theory"] = math.erf(100 / math.sqrt(2 * d_k))
    nums["scaled_theory"] = math.erf(3 / math.sqrt(2))
    centred = raw.double() - raw.double().mean()
    m2, m4 = centred.square().mean().item(), centred.pow(4).mean().item()
    nums |= {
        "excess_kurtosis": m4 / m2**2 - 3,
        "excess_kurtosis_half": 1.96 * math.sqrt(24 / n),  # its 95% half-width for near-normal
        "excess_kurtosis_theory": 6 / d_k,
    }
    nums |= {"raw_max_abs": raw.abs().max().item(), "scaled_max_abs": scaled.abs().max().item()}
    low = min(nums["raw_low"], nums["scaled_low"])
    verdict = "holds" if low >= 0.99 else "holds only partly" if low >= 0.9 else "false"
    return ClaimCheck(
        "1.1",
        "At \\(d_k = 1024\\) raw scores lie in about \\([-100, 100]\\) and scaled ones in about \\([-3, 3]\\).",
        verdict,
        f"Of {n:,} scores drawn from the exact distribution for Gaussian coordinates, "
        f"{nums['raw_inside']:.2%} of raw ones lie within ±100 (95% interval "
        f"{nums['raw_low']:.2%} to {nums['raw_high']:.2%}) and {nums['scaled_inside']:.2%} of "
        f"scaled ones within ±3 (interval {nums['scaled_low']:.2%} to {nums['scaled_high']:.2%}). "
        f"Exactly, {nums['raw_exact']:.3%} and {nums['scaled_exact']:.3%}; under the normal "
        f"approximation \\(q \\cdot k \\sim \\mathcal{{N}}(0, d_k)\\), {nums['raw_theory']:.3%} and "
        f"{nums['scaled_theory']:.3%}. They differ little because the excess kurtosis of "
        f"\\(q \\cdot k\\) is \\(6/d_k\\) = {nums['excess_kurtosis_theory']:.4f} (measured "
        f"{nums['excess_kurtosis']:.4f} ± {nums['excess_kurtosis_half']:.4f}). The largest "
        f"magnitudes drawn, {nums['raw_max_abs']:.0f} and {nums['scaled_max_abs']:.2f}, grow with "
        "the number of draws.",
        "holds if the 95% interval of the measured fraction inside lies above 99% for both ranges; "
        "partly if above 90%; false otherwise. The draws are exact for Gaussian coordinates, so no "
        "normal approximation enters the verdict; other unit-variance coordinates give "
        "\\(q \\cdot k\\) another excess kurtosis than \\(6/d_k\\), and other tails",
        _GALLERY + "01_variance/plot_01_variance_growth/",
        nums,
    )


def _check_1_2(gen: torch.Generator) -> ClaimCheck:
    n = 20_000
    worst_var, worst_mean = 0.0, 0.0
    nums: dict[str, float] = {}
    for d_k in (16, 64, 256, 1024):
        s = sample_scores(d_k, n, method="dot", generator=gen, dtype=torch.float64)
        est = variance_estimate(s)
        nums[f"var_{d_k}"] = est.variance
        worst_var = max(worst_var, abs(est.variance - d_k) / est.stderr)
        worst_mean = max(worst_mean, abs(s.mean().item()) / math.sqrt(d_k / n))
    nums |= {"worst_var_z": worst_var, "worst_mean_z": worst_mean}
    ok = worst_var < 4 and worst_mean < 4
    return ClaimCheck(
        "1.2",
        "For i.i.d. zero-mean, unit-variance components, \\(q \\cdot k\\) has mean 0 and variance \\(d_k\\).",
        "holds" if ok else "false",
        "Sample variances "
        + ", ".join(f"{nums[f'var_{d}']:.1f}" for d in (16, 64, 256, 1024))
        + f" for \\(d_k\\) = 16, 64, 256, 1024; the largest deviation from \\(d_k\\) is "
        f"{worst_var:.1f} standard errors, from mean 0 {worst_mean:.1f}.",
        "holds if mean and variance are within 4 standard errors of 0 and \\(d_k\\); false otherwise",
        _GALLERY + "01_variance/plot_01_variance_growth/",
        nums,
    )


def _check_2_1(gen: torch.Generator) -> ClaimCheck:
    cases = torch.tensor([[1.0, 0.5, -0.5], [10.0, 9.5, 8.5], [100.0, 99.5, 98.5]])
    p = tempered_softmax(cases)
    h = softmax_entropy(cases)
    spread = (p - p[0]).abs().max().item()
    nums = {"max_difference": spread, "entropy": h[0].item(), "p_max": p[0, 0].item()}
    return ClaimCheck(
        "2.1",
        "Adding a constant to the logits (case 1 → case 2 → case 3) makes the softmax sharper.",
        "false" if spread < 1e-6 else "holds",
        # the difference, not "identical": whether the last bits agree depends on the CPU
        f"All three cases give the same probabilities (largest difference {spread:.1e}), "
        f"max probability {nums['p_max']:.4f} and entropy {nums['entropy']:.4f} nats: "
        "softmax ignores a shift. Multiplying the logits is what sharpens it.",
        "false if the three outputs agree to 1e-6; holds otherwise",
        _GALLERY + "02_softmax/plot_01_shift_vs_scale/",
        nums,
    )


#: Where the claims about large logits are judged: sigma = 32 = sqrt(1024), the article's
#: largest d_k left unscaled. Below 1% of the median norm at sigma = 1 (unit-variance logits,
#: what 1/sqrt(d_k) gives) a row's gradient counts as tiny.
LARGE_SIGMA = 32.0
TINY = 0.01


def _saturation_verdict(nums: dict[str, float]) -> str:
    """2.2's rule on the quantiles of the Jacobian norm at ``LARGE_SIGMA``."""
    tiny = TINY * nums["median_sigma_1"]
    if nums[f"p90_sigma_{LARGE_SIGMA:g}"] < tiny:
        return "holds"  # nine rows in ten starved
    return "holds only partly" if nums[f"median_sigma_{LARGE_SIGMA:g}"] < tiny else "false"


def _check_2_2(gen: torch.Generator) -> ClaimCheck:
    # The softmax-gradient page's own rows and function, so the peak printed there and here agree.
    # Quantiles over rows, not the mean: the mean at large sigma is carried by the rare rows
    # whose top logits nearly tie (the training page reads the same notion as a median too).
    del gen
    z = experiments.softmax_rows()  # (rows, 64)
    sigmas = (1.0, 2.0, 4.0, 8.0, 16.0, LARGE_SIGMA)
    levels = torch.tensor([0.1, 0.5, 0.9], dtype=torch.float64)
    nums: dict[str, float] = {}
    for s in sigmas:
        norms = softmax_jacobian_norm(s * z).double()  # (rows,)
        p10, median, p90 = torch.quantile(norms, levels).tolist()
        nums |= {f"p10_sigma_{s:g}": p10, f"median_sigma_{s:g}": median, f"p90_sigma_{s:g}": p90}
        nums[f"mean_sigma_{s:g}"] = norms.mean().item()
    peak, peak_value = experiments.jacobian_norm_peak(z)
    nums |= {"peak_sigma": peak, "peak_norm": peak_value}
    at = f"{LARGE_SIGMA:g}"
    return ClaimCheck(
        "2.2",
        "Large logits push the softmax into a region of tiny gradients.",
        _saturation_verdict(nums),
        f"Frobenius norm of the softmax Jacobian over {z.shape[0]:,} rows of {z.shape[1]} logits "
        "with std σ, median (10th to 90th percentile): "
        + "; ".join(
            f"σ = {s:g}: {nums[f'median_sigma_{s:g}']:.2g} ({nums[f'p10_sigma_{s:g}']:.2g} to "
            f"{nums[f'p90_sigma_{s:g}']:.2g})"
            for s in sigmas
        )
        + f". At σ = {at} the median row keeps "
        f"{nums[f'median_sigma_{at}'] / nums['median_sigma_1']:.2%} of the median at σ = 1, "
        f"while a tenth of the rows (top logits nearly tied) keep more than "
        f"{nums[f'p90_sigma_{at}']:.2g}. The mean, which those rows carry, peaks at "
        f"σ = {peak:.2f} ({peak_value:.3f}, on a grid a quarter octave apart) and is "
        f"{nums[f'mean_sigma_{at}']:.3f} at σ = {at}.",
        f"judged at σ = {at} (\\(q \\cdot k\\) unscaled at \\(d_k = 1024\\)), a gradient "
        f"counting as tiny below {TINY:.0%} of the median at σ = 1: holds if the 90th percentile "
        "is tiny (nine rows in ten starved); partly if the median is; false otherwise. Quantiles, "
        "not the mean, which rare near-tie rows carry",
        _GALLERY + "02_softmax/plot_03_softmax_gradient/",
        nums,
    )


#: The rows of the table of techniques in the article's section 3.2.
ARTICLE_TABLE = ("scaled dot product", "LayerNorm", "initialisation")

#: The fixes for attention's stability that the site examines: name -> (the guide page, relative
#: to the gallery, and a term its source uses for the fix, which a test looks for).
SITE_FIXES: dict[str, tuple[str, str]] = {
    "scaled dot product": ("01_variance/plot_01_variance_growth/", "1/\\sqrt{d_k}"),
    "LayerNorm": ("03_normalization/plot_02_weight_growth/", "LayerNorm"),
    "initialisation": ("01_variance/plot_02_beyond_assumptions/", "Xavier"),
    "QK-norm": ("03_normalization/plot_02_weight_growth/", "QK-LayerNorm"),
    "σReparam": ("05_debugging/plot_04_entropy_collapse/", "σReparam"),
    "soft-capping": ("05_debugging/plot_02_soft_cap/", "soft-cap"),
    "QK-Clip": ("04_training/plot_06_optimisers/", "QK-Clip"),
}


def _check_3_2a(gen: torch.Generator) -> ClaimCheck:
    del gen
    missing = [name for name in SITE_FIXES if name not in ARTICLE_TABLE]
    return ClaimCheck(
        "3.2a",
        "The article's table of techniques that keep training stable is complete.",
        "false" if missing else "holds",
        f"The table has {len(ARTICLE_TABLE)} rows: {', '.join(ARTICLE_TABLE)}. Of the fixes "
        f"the site examines it leaves out {len(missing)}, all of which act on the attention "
        f"logits: {', '.join(missing)}.",
        "false if a fix the site examines is missing from the table; holds otherwise",
        _GALLERY + "03_normalization/plot_04_comparison_table/",
        {"listed": float(len(ARTICLE_TABLE)), "missing": float(len(missing))},
    )


#: Attention counts as collapsed below half the largest normalised entropy (1, uniform).
COLLAPSED = 0.5


def _stability_verdict(nums: dict[str, float]) -> str:
    """3.2b's rule on the normalised entropies of scaled attention, at init and grown tenfold."""
    if nums["sqrt_g1"] < COLLAPSED:
        return "false"  # collapsed already at initialisation
    return "holds" if nums["sqrt_g10"] >= COLLAPSED else "holds only partly"


def _check_3_2b(gen: torch.Generator) -> ClaimCheck:
    # The article's table presents the scale, LayerNorm and initialisation as together
    # keeping attention stable. Grow W_q and W_k by g = 10 (logit growth in training):
    # LayerNorm on the inputs and 1/sqrt(d_k) do not stop the collapse; QK-norm does.
    d_model, d_k, n_tok, g = 128, 64, 64, 10.0
    x = F.layer_norm(torch.randn(32, n_tok, d_model, generator=gen), (d_model,))
    w_q = torch.randn(d_model, d_k, generator=gen) / math.sqrt(d_model)
    w_k = torch.randn(d_model, d_k, generator=gen) / math.sqrt(d_model)

    def entropy(scale: float, qk_norm: bool) -> float:
        q, k = x @ (scale * w_q), x @ (scale * w_k)  # (batch, tokens, d_k)
        if qk_norm:
            q, k = F.layer_norm(q, (d_k,)), F.layer_norm(k, (d_k,))
        logits = q @ k.transpose(-1, -2) / math.sqrt(d_k)  # (batch, tokens, tokens)
        return softmax_entropy(logits, normalized=True).mean().item()

    nums = {
        "sqrt_g1": entropy(1.0, False),
        "sqrt_g10": entropy(g, False),
        "qknorm_g10": entropy(g, True),
    }
    return ClaimCheck(
        "3.2b",
        "Scaling, LayerNorm and good initialisation together keep attention stable.",
        _stability_verdict(nums),
        f"With LayerNorm'd inputs, \\(1/\\sqrt{{d_k}}\\) and a unit-variance initialisation the "
        f"normalised attention entropy is {nums['sqrt_g1']:.2f}; growing \\(W_q, W_k\\) tenfold "
        f"(logit growth in training) drops it to {nums['sqrt_g10']:.2f}. QK-LayerNorm, missing "
        f"from the table, keeps it at {nums['qknorm_g10']:.2f}.",
        f"collapsed: normalised entropy below {COLLAPSED}. Holds if scaled attention is not "
        "collapsed at initialisation nor after tenfold weight growth; partly if only at "
        "initialisation; false if collapsed already at initialisation",
        _GALLERY + "03_normalization/plot_02_weight_growth/",
        nums,
    )


#: The smallest loss difference that matters, as a fraction of the excess loss: 10^0.05 - 1.
MATTERS = 10**0.05 - 1


def _check_4_2a(arrays: dict[str, np.ndarray]) -> ClaimCheck:
    g = experiments.final_loss_gap(arrays)  # the training page prints the same numbers
    nums = {**g._asdict(), "relative_gap": g.gap / g.reference}
    # The claim is a direction; its size decides whether it matters, on the part of the loss
    # training can remove (the excess over the floor): a factor 1.12, the training pages' effect.
    if g.low > 0:
        verdict = "holds" if g.gap >= MATTERS * g.reference else "holds, negligible"
    else:
        verdict = "false"
    return ClaimCheck(
        "4.2a",
        "In the article's experiment the scaled model converges lower than the unscaled one.",
        verdict,
        f"Final-epoch training loss {g.scaled:.4f} scaled vs {g.unscaled:.4f} unscaled at the "
        f"article's learning rate ({g.seeds} seeds, the training page's stored run). Paired by "
        f"seed the unscaled model ends {g.gap:+.5f} higher (95% t-interval {g.low:+.5f} to "
        f"{g.high:+.5f}): {100 * nums['relative_gap']:.1f}% of the scaled model's excess loss "
        f"over the floor ({g.reference:.5f}).",
        f"holds if the paired gap's 95% interval lies above 0 and the gap is at least "
        f"{MATTERS:.0%} of the scaled model's excess loss (its loss minus the floor); holds, negligible "
        f"if the interval lies above 0 but the gap is smaller; false otherwise",
        _GALLERY + "04_training/plot_01_article_experiment/",
        nums,
    )


def _check_4_2b(arrays: dict[str, np.ndarray]) -> ClaimCheck:
    g = experiments.speed_gap(arrays)  # epochs to within 1% of the floor, paired by seed
    nums = {**g._asdict(), "relative_gap": g.gap / g.scaled}
    if g.low > 0:
        verdict = "holds" if g.gap >= 0.1 * g.scaled else "holds, negligible"
    else:
        verdict = "false"
    return ClaimCheck(
        "4.2b",
        "In the article's experiment the scaled model converges faster than the unscaled one.",
        verdict,
        f"Epochs until the loss is within 1% of its floor: {g.scaled:.1f} scaled vs "
        f"{g.unscaled:.1f} unscaled ({g.seeds} seeds where both get there). Paired by seed the "
        f"unscaled model needs {g.gap:+.1f} epochs (95% interval {g.low:+.1f} to {g.high:+.1f}), "
        f"{100 * nums['relative_gap']:.0f}% of the scaled model's count.",
        "holds if the paired difference's 95% interval lies above 0 and the difference is at "
        "least 10% of the scaled model's epochs; holds, negligible if the interval lies above 0 "
        "but the difference is under 10%; false otherwise",
        _GALLERY + "04_training/plot_01_article_experiment/",
        nums,
    )


def _check_4_2c(arrays: dict[str, np.ndarray]) -> ClaimCheck:
    i = list(arrays["quarters"]).index(experiments.ARTICLE_QUARTER)
    spikes = float(arrays["grad_max_over_median"][:, i].max())
    # Saturation acts at the softmax input: the gradient there, per query row (the weight
    # gradient carries the missing 1/sqrt(d_k) as a factor).
    starved, _, _ = experiments.logit_gradient_ratio(arrays)
    epoch_loss = arrays["epoch_loss"][:, i]  # (variants, seeds, epochs)
    rises = (np.diff(epoch_loss, axis=-1) > 0).sum(-1).mean(-1)  # (variants,)
    nums = {
        "largest_grad_over_median": spikes,
        "logit_grad_unscaled_over_scaled": starved,
        "loss_rises_unscaled": float(rises[1]),
        "loss_rises_scaled": float(rises[0]),
    }
    explode = spikes > 10
    vanish = starved < 0.1
    oscillate = nums["loss_rises_unscaled"] > 2 * max(nums["loss_rises_scaled"], 1.0)
    found = sum((explode, vanish, oscillate))
    return ClaimCheck(
        "4.2c",
        "In the article's experiment the unscaled model oscillates and its gradients explode or "
        "vanish.",
        "holds" if found == 3 else "holds only partly" if found else "false",
        f"No run's gradient norm exceeds {spikes:.1f} times its median. At the softmax input the "
        f"unscaled model's gradient per query row (median over rows, then over the first "
        f"epoch) is {starved:.2f} times the scaled one's. Its epoch loss rose in "
        f"{nums['loss_rises_unscaled']:.1f} epochs on average, the scaled model's in "
        f"{nums['loss_rises_scaled']:.1f} (of {epoch_loss.shape[-1] - 1}).",
        "explode: a gradient norm above 10 times its run's median; vanish: the unscaled per-row "
        "gradient at the logits below 0.1 times the scaled one; oscillate: the unscaled loss rising "
        "in more than twice as many epochs as the scaled one. Holds if all three are seen, partly "
        "if some, false if none",
        _GALLERY + "04_training/plot_01_article_experiment/",
        nums,
    )


def _check_5_1(gen: torch.Generator) -> ClaimCheck:
    # Whether an init gives unit variance depends on the projection's shape: a square
    # d_model -> d_model projection (split into heads afterwards, as most code does) or a
    # rectangular per-head one, and on Kaiming's gain (ReLU's sqrt(2), or 1 for a linear layer).
    d_model, d_head = 128, 32
    x = torch.randn(8192, d_model, generator=gen)
    inits: dict[str, Callable[[torch.Tensor], object]] = {
        "xavier_uniform": nn.init.xavier_uniform_,
        "kaiming_relu": lambda w: nn.init.kaiming_uniform_(w, nonlinearity="relu"),
        "kaiming_linear": lambda w: nn.init.kaiming_uniform_(w, nonlinearity="linear"),
        # nn.Linear's own reset_parameters (Kaiming uniform with a = sqrt(5)): what a model gets
        # when nobody chooses, and what the training pages' models use
        "torch_default": lambda w: nn.init.kaiming_uniform_(w, a=math.sqrt(5)),
    }
    nums: dict[str, float] = {}
    with torch.no_grad():
        for shape, d_out in (("square", d_model), ("per_head", d_head)):
            layer = nn.Linear(d_model, d_out, bias=False)
            for name, init in inits.items():
                # The CPU generator only (check_claims restores it); torch.manual_seed would
                # also reseed CUDA's.
                torch.default_generator.manual_seed(
                    int(torch.randint(0, 2**31, (1,), generator=gen))
                )
                init(layer.weight)
                nums[f"{name}_{shape}"] = layer(x).var().item()
    nums["theory_xavier_per_head"] = init_projection_variance("xavier_uniform", d_model, d_head)
    near = {k: abs(v - 1) <= 0.25 for k, v in nums.items() if not k.startswith("theory")}
    claimed = [
        k for k in near if k.startswith(("xavier", "kaiming_relu"))
    ]  # as the claim uses them
    verdict = (
        "holds"
        if all(near[k] for k in claimed)
        else "holds only partly"
        if any(near[k] for k in claimed)
        else "false"
    )
    return ClaimCheck(
        "5.1",
        "Xavier or Kaiming initialisation gives queries and keys of roughly unit variance.",
        verdict,
        f"For unit-variance inputs, Var\\((q_i)\\) with a square {d_model} → {d_model} "
        f"projection: Xavier {nums['xavier_uniform_square']:.2f}, Kaiming with ReLU gain "
        f"{nums['kaiming_relu_square']:.2f}, Kaiming with gain 1 (LeCun) "
        f"{nums['kaiming_linear_square']:.2f}; with a per-head {d_model} → {d_head} projection: "
        f"{nums['xavier_uniform_per_head']:.2f}, {nums['kaiming_relu_per_head']:.2f} and "
        f"{nums['kaiming_linear_per_head']:.2f}. Xavier gives 1 only when the projection is "
        "square; Kaiming only with gain 1. PyTorch's default nn.Linear initialisation, which "
        f"the training pages' models keep, gives {nums['torch_default_square']:.2f} and "
        f"{nums['torch_default_per_head']:.2f}: unscaled logits then start near √d_k/3, not √d_k.",
        "holds if Xavier and Kaiming (ReLU gain, its default use) are within 25% of 1 for both "
        "shapes; partly if some of them are; false if none is",
        _GALLERY + "01_variance/plot_02_beyond_assumptions/",
        nums,
    )


def _check_5_3(gen: torch.Generator) -> ClaimCheck:
    params = list(inspect.signature(nn.MultiheadAttention).parameters)
    has_param = any("sqrt" in p or "scale" in p for p in params)
    embed, heads = 64, 4
    mha = nn.MultiheadAttention(embed, heads, batch_first=True, bias=False)
    x = torch.randn(2, 10, embed, generator=gen)
    with torch.no_grad():
        out = mha(x, x, x, need_weights=False)[0]
        q, k, v = F.linear(x, mha.in_proj_weight).chunk(3, dim=-1)  # (batch, len, embed) each
        q, k, v = (t.view(2, 10, heads, embed // heads).transpose(1, 2) for t in (q, k, v))
        manual = F.scaled_dot_product_attention(q, k, v)  # default scale 1/sqrt(head_dim)
        manual = mha.out_proj(manual.transpose(1, 2).reshape(2, 10, embed))
    err = (out - manual).abs().max().item()
    # one sentence on every CPU: the two paths agree bit for bit on some, to round-off on others
    same = f"matches SDPA's default to float32 round-off (largest difference {err:.1e})"
    return ClaimCheck(
        "5.3",
        "nn.MultiheadAttention has a sqrt(d_k) parameter.",
        "false" if not has_param else "holds",
        f"Its constructor takes {len(params)} arguments, none of them a scale; it divides by "
        f"\\(\\sqrt{{\\text{{head dim}}}}\\) internally: its output {same}.",
        "false if no constructor argument names a scale; holds otherwise",
        _GALLERY + "05_debugging/plot_05_checklist/",
        {"max_difference": err, "n_params": float(len(params))},
    )


_CHECKS: tuple[Callable[..., ClaimCheck], ...] = (  # of a Generator, or of the article run
    _check_1_1,
    _check_1_2,
    _check_2_1,
    _check_2_2,
    _check_3_2a,
    _check_3_2b,
    _check_4_2a,
    _check_4_2b,
    _check_4_2c,
    _check_5_1,
    _check_5_3,
)


# Checks that judge the training page's stored full run instead of drawing from ``gen``.
_ON_ARTICLE: tuple[Callable[..., ClaimCheck], ...] = (_check_4_2a, _check_4_2b, _check_4_2c)


def article_checks(arrays: dict[str, np.ndarray]) -> list[ClaimCheck]:
    """Claims 4.2a-c judged on the arrays of the article's stored run (the training page's)."""
    return [check(arrays) for check in _ON_ARTICLE]


def check_claims(*, seed: int = 0) -> list[ClaimCheck]:
    """Re-measure every checkable claim of the source article.

    Some checks build ``torch.nn`` layers, which draw from torch's global generator; they run
    inside ``torch.random.fork_rng``, so the caller's global random state is left untouched
    (as by ``attnscale.make_model`` and ``attnscale.train``).

    Parameters
    ----------
    seed : int
        Seed for all the sampling, so the verdicts and numbers are reproducible: an integer in
        $[0, 2^{64})$ (Python or numpy). Claims 4.2 are judged on the stored full run of the
        article's experiment (20 seeds), whatever ``seed``.

    Returns
    -------
    list[ClaimCheck]
        One check per claim, in the article's order.

    Raises
    ------
    TypeError
        If ``seed`` is not an integer.
    ValueError
        If ``seed`` is outside $[0, 2^{64})$.

    Examples
    --------
    It reads the stored full run of the article's experiment
    (``tests/test_factcheck.py`` runs it):

    >>> from guide.factcheck import check_claims
    >>> checks = check_claims(seed=0)  # doctest: +SKIP
    >>> [c.section for c in checks][:3]  # doctest: +SKIP
    ['1.1', '1.2', '2.1']
    """
    gen = _checks.make_generator(None, seed)
    arrays = experiments.article().parts["sweep"]
    with torch.random.fork_rng(devices=[]):
        return [check(arrays) if check in _ON_ARTICLE else check(gen) for check in _CHECKS]
