r"""
# Beyond the textbook assumptions

$\mathrm{Var}[q \cdot k] = d_k$ assumes zero-mean, unit-variance, independent components. Real
queries and keys break each of those. Here the closed form of
[dot_product_moments][attnscale.dot_product_moments] meets Monte Carlo for shifted, rescaled,
correlated and non-Gaussian components, and then for queries and keys made by real
`nn.Linear` projections under common initialisations.
"""

# %%
# ## Setup

import math

import matplotlib.pyplot as plt
import torch
from torch import nn

import attnscale as asc
from guide.style import use_style

use_style()

SEED = 0
D_K = 64
N_SAMPLES = 100_000
D_MODEL = 512  # width of the token embeddings fed to the projections
N_TOKENS = 4096
N_WEIGHT_DRAWS = 8

gen = torch.Generator().manual_seed(SEED)

# %%
# ## Scaled-score variance, case by case
#
# Each case changes one assumption. The tick is the closed form for the variance of
# $q \cdot k / \sqrt{d_k}$; the dot is the Monte Carlo estimate with its 95% interval.


def plot_theory_vs_measured(labels, theory, measured, *, err, quantity):
    """Horizontal dot plot comparing a closed form with measurements, case by case."""
    _, ax = plt.subplots(figsize=(6.4, 0.45 * len(labels) + 1.2), layout="constrained")
    y = list(range(len(labels)))[::-1]  # the first case on top
    ax.plot(
        theory, y, "|", color="0.2", markersize=16, markeredgewidth=2, label="theory"
    )
    ax.errorbar(
        measured,
        y,
        xerr=err,
        fmt="o",
        color="black",
        markersize=5,
        capsize=3,
        label="measured",
    )
    ax.set_yticks(y, labels)
    ax.set_xlabel(quantity)
    ax.legend(loc="lower right")
    return ax


CASES = {
    "textbook: N(0, 1)": {},
    "means 0.5": {"mean_q": 0.5, "mean_k": 0.5},
    "means 0.5 and -0.5": {"mean_q": 0.5, "mean_k": -0.5},
    "variances 2 and 0.5": {"var_q": 2.0, "var_k": 0.5},
    "variances 2 and 2": {"var_q": 2.0, "var_k": 2.0},
    "correlation 0.5": {"rho": 0.5},
    "uniform components": {"distribution": "uniform"},
    "Rademacher (±1)": {"distribution": "rademacher"},
    "uniform, means 0.5": {"distribution": "uniform", "mean_q": 0.5, "mean_k": 0.5},
}

rows = []
for label, params in CASES.items():
    moments = {k: v for k, v in params.items() if k != "distribution"}
    theory = asc.scaled_dot_product_moments(D_K, **moments)
    s = asc.sample_scores(D_K, N_SAMPLES, scale=D_K**-0.5, generator=gen, **params)
    rows.append((label, theory, s.mean().item(), asc.variance_estimate(s)))

ax = plot_theory_vs_measured(
    [r[0] for r in rows],
    [r[1].variance for r in rows],
    [r[3].variance for r in rows],
    err=[r[3].high - r[3].variance for r in rows],
    quantity="variance of $q\\cdot k/\\sqrt{d_k}$",
)
ax.set_title(f"Closed form against Monte Carlo, $d_k = {D_K}$")

print(
    f"{'case':<22} {'mean: theory':>13} {'measured':>9} {'var: theory':>12} "
    f"{'measured':>9}"
)
for label, theory, mean, est in rows:
    print(
        f"{label:<22} {theory.mean:13.3f} {mean:9.3f} {theory.variance:12.3f} "
        f"{est.variance:9.3f} ± {1.96 * est.stderr:.3f}"
    )

# %%
# Three lessons from the table:
#
# - **Means: the total variance is not what the softmax sees.** With $\mu_q \mu_k \neq 0$ the
#   scaled score's mean is $\sqrt{d_k}\,\mu_q\mu_k$ and keeps growing with $d_k$, and the
#   variance over all pairs picks up $\mu_q^2\sigma_k^2 + \mu_k^2\sigma_q^2$. But one query's
#   row of scores, $q\cdot\mu_k + q\cdot(k - \mu_k)$, shares the first term, a shift the
#   softmax ignores; that row varies only through the keys' spread, with variance
#   $\lVert q\rVert^2\sigma_k^2/d_k$, or $\sigma_k^2(\sigma_q^2 + \mu_q^2)$ on average over queries
#   (measured below). So key means are harmless, while query means do widen the rows.
# - **Variances multiply.** The scaled variance is $\sigma_q^2\sigma_k^2$: queries and keys
#   with twice the variance give four times the variance after scaling.
# - **Correlation adds.** With correlation $\rho$ between $q_i$ and $k_i$, each term has mean
#   $\rho\sigma_q\sigma_k$ and variance $(1 + \rho^2)\sigma_q^2\sigma_k^2$. This is the effect
#   μP builds on: once training aligns $q$ with $k$, the sum grows like $d_k$, not
#   $\sqrt{d_k}$.
#
# The distribution of the components does not enter the variance: with independent $q_i$ and
# $k_i$ only their first two moments do.
#
# ## Within a row: what the softmax sees
#
# For each case with independent components, 256 queries each scored against 4,096 keys: the
# variance of one query's scaled scores across the keys, averaged over the queries, against
# $\sigma_k^2(\sigma_q^2 + \mu_q^2)$.


def components(
    n: int, mean: float = 0.0, var: float = 1.0, distribution: str = "normal"
) -> torch.Tensor:
    """``n`` vectors of ``D_K`` i.i.d. components with the given mean, variance and
    shape."""
    if distribution == "uniform":
        z = (torch.rand(n, D_K, generator=gen) * 2 - 1) * math.sqrt(3)
    elif distribution == "rademacher":
        z = torch.randint(0, 2, (n, D_K), generator=gen) * 2.0 - 1
    else:
        z = torch.randn(n, D_K, generator=gen)
    return mean + math.sqrt(var) * z


print(
    f"{'case':<22} {'over all pairs':>15} {'within a row: theory':>21} {'measured':>9}"
)
for label, params in CASES.items():
    if "rho" in params:
        continue  # a query's correlation with one key says nothing about a row of keys
    dist = params.get("distribution", "normal")
    mq, mk = params.get("mean_q", 0.0), params.get("mean_k", 0.0)
    vq, vk = params.get("var_q", 1.0), params.get("var_k", 1.0)
    q, k = components(256, mq, vq, dist), components(4096, mk, vk, dist)
    rows_var = ((q @ k.T) / math.sqrt(D_K)).var(dim=1).mean().item()
    total = asc.scaled_dot_product_moments(
        D_K, mean_q=mq, mean_k=mk, var_q=vq, var_k=vk
    ).variance
    print(f"{label:<22} {total:15.3f} {vk * (vq + mq**2):21.3f} {rows_var:9.3f}")

# %%
# ## Queries and keys from real projections
#
# In a model, $q = W_q x$ and $k = W_k x'$. For unit-variance inputs the variance of one
# component is $d_\text{model}\,\mathrm{Var}(W_{ij})$, so the initialisation decides whether
# the textbook assumption $\mathrm{Var}(q_i) = 1$ holds. The article says Xavier or Kaiming
# initialisation gives roughly unit variance. We measure it: `N_WEIGHT_DRAWS` independent
# weight draws per scheme, `N_TOKENS` random tokens each, scaled scores between different
# tokens.


def lecun_normal_(w: torch.Tensor) -> torch.Tensor:
    """LeCun (linear-gain) initialisation: N(0, 1 / fan_in)."""
    return nn.init.normal_(w, std=w.shape[1] ** -0.5)


def mha_in_proj_(w: torch.Tensor) -> torch.Tensor:
    """What nn.MultiheadAttention does: Xavier-uniform on the stacked (3E, E)
    in_proj."""
    stacked = torch.empty(3 * w.shape[1], w.shape[1])
    nn.init.xavier_uniform_(stacked)
    return w.copy_(stacked[: w.shape[0]])


INITS = {
    "nn.Linear default": ("default", lambda w: w),
    "Xavier uniform": ("xavier_uniform", nn.init.xavier_uniform_),
    "Kaiming uniform (ReLU)": (
        "kaiming_uniform",
        lambda w: nn.init.kaiming_uniform_(w, nonlinearity="relu"),
    ),
    "LeCun normal": ("lecun", lecun_normal_),
    "nn.MultiheadAttention": (None, mha_in_proj_),
}

torch.manual_seed(SEED)  # nn.Linear draws its default init from the global generator
results = {}
for label, (scheme, init) in INITS.items():
    var_q, std_scaled = [], []
    for _ in range(N_WEIGHT_DRAWS):
        w_q = nn.Linear(D_MODEL, D_K, bias=False)
        w_k = nn.Linear(D_MODEL, D_K, bias=False)
        with torch.no_grad():
            init(w_q.weight)
            init(w_k.weight)
            x = torch.randn(
                2, N_TOKENS, D_MODEL, generator=gen
            )  # (query/key, tokens, d_model)
            q, k = w_q(x[0]), w_k(x[1])  # (tokens, d_k) each
            var_q.append(q.var().item())
            std_scaled.append(((q * k).sum(-1) / math.sqrt(D_K)).std().item())
    predicted = (
        asc.init_projection_variance(scheme, D_MODEL, D_K)
        if scheme
        else 2 * D_MODEL / (D_MODEL + 3 * D_MODEL)
    )
    results[label] = (
        predicted,
        sum(var_q) / len(var_q),
        sum(std_scaled) / len(std_scaled),
    )

print(f"d_model = {D_MODEL}, d_k = {D_K}")
print(
    f"{'initialisation':<24} {'Var(q_i): theory':>16} {'measured':>9} "
    f"{'scaled logit std':>17}"
)
for label, (predicted, var_q, std_scaled) in results.items():
    print(f"{label:<24} {predicted:16.3f} {var_q:9.3f} {std_scaled:17.3f}")

fig, ax = plt.subplots(figsize=(6.4, 3.2), layout="constrained")
labels = list(results)
ax.barh(labels[::-1], [results[k][2] for k in labels[::-1]], color="0.6")
ax.axvline(1.0, color="0.3", linestyle="--", linewidth=1, label="textbook assumption")
ax.set_xlabel("std of $q\\cdot k/\\sqrt{d_k}$ at initialisation")
ax.legend(frameon=False, loc="lower right")
ax.set_ylabel("initialisation of $W_q$ and $W_k$")
ax.set_title(
    "Scaled logit spread, one head: "
    f"$d_{{\\mathrm{{model}}}} = {D_MODEL}$, $d_k = {D_K}$"
)

# %%
# For these per-head projections ($d_\text{model} \to d_k$), only LeCun initialisation gives
# $\mathrm{Var}(q_i) = 1$. PyTorch's `nn.Linear` default (Kaiming-uniform with $a = \sqrt 5$,
# i.e. $\mathrm{U}(\pm 1/\sqrt{d_\text{in}})$) gives $1/3$; Xavier gives
# $2 d_\text{model}/(d_\text{model} + d_k)$, which is above 1 whenever $d_\text{model} > d_k$
# and exactly 1 for a square projection ($d_\text{model} \to d_\text{model}$, split into heads
# afterwards, as much code writes it); Kaiming with the ReLU gain gives 2. Since the scaled logit standard
# deviation is $\mathrm{Var}(q_i)$ when queries and keys share a scheme, a model with default
# `nn.Linear` projections starts with logits well below unit spread, i.e. with flatter
# attention than the textbook picture. Nothing breaks: $1/\sqrt{d_k}$ removes the dependence
# on $d_k$, and the constant left over is the initialisation's. The article's claim that
# Xavier or Kaiming initialisation yields unit variance therefore holds only partly, as the
# fact-check also finds: Xavier gives it for a square projection only, Kaiming in its usual
# ReLU form never.
#
# ## References
#
# - Glorot and Bengio (2010), *Understanding the difficulty of training deep feedforward
#   neural networks* (Xavier initialisation).
# - He et al. (2015), arXiv:1502.01852 (Kaiming initialisation).
# - LeCun et al. (1998), *Efficient BackProp* (fan-in initialisation).
# - Yang et al. (2022), *Tensor Programs V*, arXiv:2203.03466: $1/d_k$ attention scaling,
#   because trained queries and keys become correlated.
