r"""
# Sequence length: the same logits, flatter attention

The entropy of an attention row depends on how many keys it spreads over. At a fixed logit
spread, a longer row has more entropy, and even its entropy as a fraction of the largest
possible, $H / \log n$, drifts towards 1 while the weight of the best key falls: attention fades
as the context grows. Three fixes in use multiply the logits by a factor that grows with $n$:
log-$n$ scaling (Chiang & Cholak 2022; Su 2021, calibrated to the training length),
Scalable-Softmax (SSMax, Nakanishi 2025) and YaRN's attention temperature for extended contexts
(Peng et al. 2023), which a model applies either at every length (static) or only past the
training length (dynamic). This page measures what each does to the entropy and to the largest
weight as $n$ grows from 16 to 65536, at three logit spreads: the size of the effect, and of
each fix, depends on the spread.
"""

# %%
# ## Setup
#
# Each row holds $n$ logits $\sigma z_j$ with $z_j \sim \mathcal{N}(0, 1)$, at three spreads:
# $\sigma = 1/3$, what `nn.Linear`'s default initialisation leaves after $1/\sqrt{d_k}$
# ([at initialisation](../03_normalization/plot_01_at_initialisation.md)); $\sigma = 1$, the
# spread of unit-variance queries and keys; and $\sigma = 3$, a trained head that picks its keys
# sharply. Each fix multiplies the row by a factor $c(n)$, set to 1 at a training length
# $n_0 = 512$:
#
# - **fixed scale**: $c = 1$ at every length (plain $1/\sqrt{d_k}$).
# - **log-$n$ scaling, SSMax**: $c = \log n / \log n_0 = \log_{n_0} n$. This is Su's
#   entropy-invariant scaling (Su 2021), which Qwen uses as `logn-attn`, there only past the
#   training length, as $\max(1, \log_{n_0} n)$. SSMax writes the logits as $s \log n \cdot z$
#   with a learned $s$ per head; $s = 1/\log n_0$ makes it this curve.
# - **YaRN**: extending the context by a factor $s$ multiplies $q$ and $k$ each by YaRN's
#   attention factor $\sqrt{1/t} = 0.1 \ln s + 1$, so $c = (0.1 \ln s + 1)^2$. Two ways to
#   choose $s$ are in use, and the figure draws both.
# - **YaRN, static** fixes $s$ once, as a model's configuration does; here $s = 128$, the
#   extension from $n_0$ to the longest row. The factor then applies at *every* length, short
#   rows inside the training window included.
# - **YaRN, dynamic** sets $s = \max(1, n / n_0)$ from the current length (the paper's dynamic
#   scaling): no change up to $n_0$, a factor that grows with $n$ beyond. The two meet at the
#   longest row, where $n / n_0 = s$.
#
# Only YaRN's temperature is modelled: its change of the RoPE frequencies has no counterpart in
# Gaussian logits.
#
# The metric is the mean **normalised entropy** $H / \log n$ over rows, the statistic the
# monitor reports; the largest weight $\max_j p_j$ is drawn below it, one column of panels per
# $\sigma$. The thin black line is the large-$n$ prediction for the fixed scale,
# $H \approx \log n - \sigma^2/2$ ([gaussian_logit_entropy][attnscale.gaussian_logit_entropy]),
# drawn where it applies, $\sigma^2 \le \log n$. Curves that coincide are drawn in different
# line styles, the later one over the earlier: dynamic YaRN (dash-dotted) lies on the fixed
# scale up to $n_0$, and on static YaRN (dashed) at the longest row.

import math
from fractions import Fraction

import matplotlib.pyplot as plt
import torch

import attnscale
from guide import figures, style
from guide.printing import fold
from guide.tables import Table

style.use_style()

SEED = 0
SIGMAS = [1 / 3, 1.0, 3.0]  # the logit spread: default init, unit q and k, a sharp head
N0 = 512  # the training length each fix is calibrated to
LENGTHS = [2**e for e in range(4, 17)]  # 16 ... 65536 keys
ROWS = 200  # rows per length, fewer for the longest rows (at most ELEMENTS logits)
ELEMENTS = 2**21
S_STATIC = LENGTHS[-1] // N0  # static YaRN's extension factor: n0 to the longest row


def label(sigma: float) -> str:
    return str(Fraction(sigma).limit_denominator(10))


def fixed(n: int) -> float:
    return 1.0


def log_n(n: int) -> float:
    return math.log(n) / math.log(N0)


def yarn_factor(s: float) -> float:
    """YaRN's factor on the logits for an extension by s: (0.1 ln s + 1) on q and on
    k."""
    return (0.1 * math.log(s) + 1) ** 2


def yarn_dynamic(n: int) -> float:
    return yarn_factor(n / N0) if n > N0 else 1.0


def yarn_static(n: int) -> float:
    return yarn_factor(S_STATIC)


FIXES = {
    "fixed scale": fixed,
    "log-n scaling, SSMax": log_n,
    "YaRN, dynamic": yarn_dynamic,
    "YaRN, static": yarn_static,
}

gen = torch.Generator().manual_seed(SEED)
entropy = {(sigma, name): [] for sigma in SIGMAS for name in FIXES}
largest = {(sigma, name): [] for sigma in SIGMAS for name in FIXES}
for n in LENGTHS:
    z = torch.randn(min(ROWS, ELEMENTS // n), n, generator=gen, dtype=torch.float64)
    measured = {}  # spread c(n) * sigma -> (H / log n, largest weight); one z for all
    for sigma in SIGMAS:
        for name, factor in FIXES.items():
            spread = factor(n) * sigma
            if spread not in measured:
                logits = spread * z  # (rows, keys)
                measured[spread] = (
                    attnscale.softmax_entropy(logits, normalized=True).mean().item(),
                    attnscale.max_probability(logits).mean().item(),
                )
            entropy[sigma, name].append(measured[spread][0])
            largest[sigma, name].append(measured[spread][1])
# the large-n prediction, where it applies (sigma^2 <= log n)
theory = {
    sigma: [
        (n, attnscale.gaussian_logit_entropy(n, sigma) / math.log(n))
        for n in LENGTHS
        if sigma**2 <= math.log(n)
    ]
    for sigma in SIGMAS
}

fig, axes = plt.subplots(
    2, len(SIGMAS), figsize=(12, 7.6), sharex=True, layout="constrained"
)
# later curves are drawn over earlier ones, each in its own line style and marker
looks = {
    "fixed scale": ("-", "o", 7),
    "log-n scaling, SSMax": ("-", "s", 5),
    "YaRN, dynamic": ("-.", "^", 5),
    "YaRN, static": ("--", "D", 4),
}
legend = {
    "fixed scale": "fixed scale",
    "log-n scaling, SSMax": "log-n scaling, SSMax",
    "YaRN, dynamic": "YaRN, dynamic ($s = n / n_0$; the fixed scale up to $n_0$)",
    "YaRN, static": f"YaRN, static ($s$ = {S_STATIC} at every $n$)",
}
for col, sigma in enumerate(SIGMAS):
    ax_h, ax_p = axes[:, col]
    for k, name in enumerate(FIXES):
        linestyle, marker, size = looks[name]
        look = {
            "color": figures.ordered_colour(k, len(FIXES)),
            "linestyle": linestyle,
            "marker": marker,
            "markersize": size,
            "label": legend[name],
        }
        ax_h.plot(LENGTHS, entropy[sigma, name], **look)
        ax_p.plot(LENGTHS, largest[sigma, name], **look)
    ns, predicted = zip(*theory[sigma], strict=True)
    ax_h.plot(
        ns,
        predicted,
        color="black",
        linewidth=1,
        zorder=3,
        label="fixed scale, large-n prediction",
    )
    for ax in (ax_h, ax_p):
        figures.vmarks(ax, {f"training length $n_0$ = {N0}": N0})
        ax.set_xscale("log", base=2)
    ax_h.set_title(f"sigma = {label(sigma)}")
    ax_p.set_yscale("log")
    ax_p.set_xlabel("keys per row $n$")
axes[0, 0].set_ylabel("normalised entropy $H / \\log n$")
axes[1, 0].set_ylabel("largest weight $\\max_j p_j$")
fig.suptitle(
    f"Rows of n Gaussian logits, up to {ROWS} rows per n, by the logit spread sigma"
)
figures.one_legend(fig, ncols=3)

# %%
# ## The factors

Table(
    ["n", "c(n), log-n", "c(n), YaRN dynamic", "c(n), YaRN static"],
    [
        [n, f"{log_n(n):.2f}", f"{yarn_dynamic(n):.2f}", f"{yarn_static(n):.2f}"]
        for n in LENGTHS
    ],
)

# %%
# ## The numbers
#
# At a few of the lengths; the figure has them all.

short = {
    "fixed scale": "fixed",
    "log-n scaling, SSMax": "log-n",
    "YaRN, dynamic": "YaRN dyn.",
    "YaRN, static": "YaRN static",
}
shown = [16, 128, N0, 4096, LENGTHS[-1]]
headers = ["sigma", "n"] + [f"H / log n, {short[k]}" for k in FIXES]
headers += [f"largest weight, {short[k]}" for k in FIXES]
Table(
    headers,
    [
        [label(sigma), n]
        + [f"{entropy[sigma, k][LENGTHS.index(n)]:.3f}" for k in FIXES]
        + [f"{largest[sigma, k][LENGTHS.index(n)]:.1e}" for k in FIXES]
        for sigma in SIGMAS
        for n in shown
    ],
)

# %%
# ## What the measurement says
#
# - **At a fixed scale, attention fades with length, at every spread.** From the shortest row
#   to the longest, $H / \log n$ rises and the best key's weight falls: the logits do not grow,
#   while the number of keys competing for the mass does. How it shows depends on $\sigma$. At
#   $\sigma = 1/3$ the row is close to uniform at every length: $H / \log n$ hardly moves, and
#   the best key's weight falls by a factor of the same order as the growth of $n$. The wider
#   the spread, the more $H / \log n$ rises and the less the best key's weight falls (printed
#   below). The large-$n$ prediction follows the measured entropy where it is drawn. A
#   threshold on $H / \log n$ therefore means different things at different lengths, and at
#   different spreads; compare a head with itself at one length.
# - **Log-$n$ scaling and SSMax** raise the logits fast enough that the entropy moves away from
#   its ceiling as $n$ grows instead of towards it, at every spread. What that does to the best
#   key depends on $\sigma$: from $n_0$ to the longest row its weight still falls steeply at
#   $\sigma = 1/3$, falls by a far smaller factor than at the fixed scale at $\sigma = 1$, and
#   *grows* at $\sigma = 3$. The factor multiplies the spread, so no one factor suits every
#   spread.
# - **Dynamic YaRN** leaves every length up to $n_0$ alone. Beyond it, over this range, its
#   factor grows faster than $\log n / \log n_0$, so past $n_0$ it sharpens the rows more than
#   log-$n$ scaling does, at every spread. At $\sigma = 1$ the best key keeps about the weight
#   it had at $n_0$; at $\sigma = 1/3$ that weight still falls, at $\sigma = 3$ it grows.
# - **Static YaRN is a different curve inside the training window.** Its factor, printed
#   below, applies to the short rows too: in this model of the logits, a model served with a
#   fixed YaRN factor attends more sharply than the fixed scale on prompts shorter than $n_0$,
#   by a margin in $H / \log n$ that is small at $\sigma = 1/3$ and several times larger at
#   $\sigma = 1$ and $3$ (printed below). Static and dynamic YaRN agree only where $n / n_0$
#   equals the configured $s$, the longest row here.
# - None of the fixes changes what $1/\sqrt{d_k}$ is for: they act on the length, not on the
#   head size, and multiply whatever spread $1/\sqrt{d_k}$ leaves.

first, last, at_n0 = 0, len(LENGTHS) - 1, LENGTHS.index(N0)
window = range(at_n0 + 1)  # lengths inside the training window, n <= n0
for sigma in SIGMAS:
    h, p = entropy[sigma, "fixed scale"], largest[sigma, "fixed scale"]
    print(
        f"sigma = {label(sigma)}, fixed scale: H/log n {h[first]:.3f} at n = "
        f"{LENGTHS[first]}, "
        f"{h[last]:.3f} at n = {LENGTHS[last]};\n  the best key's weight falls "
        f"{p[first] / p[last]:.0f}-fold over the range, while n grows "
        f"{LENGTHS[last] // LENGTHS[first]}-fold"
    )
for sigma in SIGMAS:
    ns, predicted = zip(*theory[sigma], strict=True)
    measured = [entropy[sigma, "fixed scale"][LENGTHS.index(n)] for n in ns]
    gap = max(abs(t - m) for t, m in zip(predicted, measured, strict=True))
    print(
        f"sigma = {label(sigma)}: largest gap between prediction and measurement "
        f"{gap:.3f} "
        f"(n from {ns[0]})"
    )
for sigma in SIGMAS:
    ratios = ", ".join(
        f"{short[k]} {largest[sigma, k][last] / largest[sigma, k][at_n0]:.2g}"
        for k in ("fixed scale", "log-n scaling, SSMax", "YaRN, dynamic")
    )
    print(
        fold(
            f"sigma = {label(sigma)}: best key's weight at n = {LENGTHS[last]} / "
            f"at n0: "
            f"{ratios}"
        )
    )
for sigma in SIGMAS:
    below = [
        entropy[sigma, "YaRN, dynamic"][i] - entropy[sigma, "YaRN, static"][i]
        for i in window
    ]
    print(
        fold(
            f"sigma = {label(sigma)}: inside the training window static YaRN's H/log n "
            f"is {min(below):.3f} to {max(below):.3f} below dynamic YaRN's"
        )
    )
meet = all(
    entropy[sigma, "YaRN, static"][last] == entropy[sigma, "YaRN, dynamic"][last]
    for sigma in SIGMAS
)
print(
    f"static and dynamic YaRN at n = {LENGTHS[last]:d}: the same logits"
    if meet
    else f"static and dynamic YaRN at n = {LENGTHS[last]:d}: different logits"
)
print(
    f"factor at n = {LENGTHS[last]}: log-n {log_n(LENGTHS[last]):.2f}, "
    f"YaRN dynamic {yarn_dynamic(LENGTHS[last]):.2f}; YaRN static "
    f"{yarn_static(N0):.2f} at "
    "every n"
)

# %%
# ## References
#
# - Chiang & Cholak 2022, *Overcoming a Theoretical Limitation of Self-Attention*,
#   arXiv:2202.12172 (scaling the logits by $\log n$).
# - Su 2021, *从熵不变性看Attention的Scale操作* (Attention's scale from entropy invariance),
#   kexue.fm/archives/8823 (the factor $\log_{n_0} n$; Qwen's `logn-attn`).
# - Nakanishi 2025, *Scalable-Softmax Is Superior for Attention*, arXiv:2501.19399.
# - Peng et al. 2023, *YaRN: Efficient Context Window Extension of Large Language Models*,
#   arXiv:2309.00071 (the attention factor; dynamic scaling).
