r"""
# Attention sinks: mass with nowhere to go

Softmax weights sum to 1, so a head with nothing to add for a query must still put its mass
somewhere. Trained language models put it on the first token: in most heads of their later
layers, the first key takes most of the weight whatever the query (Xiao et al. 2023), and the
hidden state of that token grows to values hundreds of times the others (Sun et al. 2024). The
first token is the one key every query sees under a causal mask, so it is where such mass can
go harmlessly: a sink's value vector is typically near zero, so the weight it draws adds little
to the output and the head, for that query, acts as a no-op (Gu et al. 2024). Gu et al. trace
the sink to softmax's normalisation itself: with sigmoid attention, which does not normalise,
none emerged in the language models they trained. This page measures what a sink does to the
numbers a monitor reads (the max logit, the entropy, the float16 headroom) and what a learned
sink column (GPT-OSS) or a $+1$ in the softmax's denominator changes.
"""

# %%
# ## What a sink costs in logits
#
# A row holds $n$ ordinary logits $x_j \sim \mathcal{N}(0, 1)$ (the spread $1/\sqrt{d_k}$ gives)
# and a sink whose logit $s$ takes the share $p$ of the mass. Solving
# $e^{s} / (e^{s} + \sum_j e^{x_j}) = p$ gives
# $s = \log\frac{p}{1-p} + \log \sum_j e^{x_j} \approx \log\frac{p}{1-p} + \log n + \tfrac12$:
# the sink's logit, which is the row's max logit, grows with the length and with the share.
# Before the scale it is $\sqrt{d_k}$ times larger; the float16 headroom printed is
# $65504 / (s \sqrt{d_k})$ at $d_k = 128$. The entropy is that of the whole row, as a fraction of
# $\log(n+1)$, the quantity the monitor's entropy-collapse check reads.
#
# A **learned sink column** (GPT-OSS: one learned logit per head, appended to every row and
# dropped after the softmax) or **softmax with $+1$** (a column fixed at 0) takes the same share
# without any query-key product growing: the max logit over the real keys stays that of the
# ordinary logits. Dropping the column's weight makes it a sink whose value is exactly zero, the
# no-op a sink token approaches with its near-zero value vector.

import math

import matplotlib.pyplot as plt
import torch

import attnscale
from guide import figures, style
from guide.printing import fold

style.use_style()

SEED = 0
LENGTHS = [64, 256, 1024, 4096, 16384]
SHARES = [0.5, 0.9, 0.99]
ROWS = 200
D_K = 128
gen = torch.Generator().manual_seed(SEED)

sink_logit = {p: [] for p in SHARES}  # the max logit with a sink token
entropy = {p: [] for p in SHARES}  # H / log(n + 1) of the row with the sink
plain_max, plain_entropy = [], []  # the ordinary logits alone
for n in LENGTHS:
    x = torch.randn(ROWS, n, generator=gen, dtype=torch.float64)  # (rows, keys)
    lse = torch.logsumexp(x, dim=-1, keepdim=True)  # (rows, 1)
    plain_max.append(x.amax(dim=-1).mean().item())
    plain_entropy.append(attnscale.softmax_entropy(x, normalized=True).mean().item())
    for p in SHARES:
        s = math.log(p / (1 - p)) + lse  # (rows, 1): the sink's logit
        row = torch.cat([s, x], dim=-1)  # (rows, 1 + keys)
        sink_logit[p].append(s.mean().item())
        entropy[p].append(attnscale.softmax_entropy(row, normalized=True).mean().item())

header = f"{'n':>6} {'no sink':>8} " + "".join(
    f"{'sink ' + str(p):>10}" for p in SHARES
)
for title, plain, with_sink, digits in (
    ("max logit of the row", plain_max, sink_logit, 2),
    ("H / log(n + 1)", plain_entropy, entropy, 3),
):
    print(f"{title}, by the sink's share:\n{header}")
    for i, n in enumerate(LENGTHS):
        cells = "".join(f"{with_sink[p][i]:>10.{digits}f}" for p in SHARES)
        print(f"{n:>6} {plain[i]:>8.{digits}f} {cells}")
worst = max(sink_logit[max(SHARES)]) * math.sqrt(D_K)
print(
    f"largest raw q.k of a sink here (p = {max(SHARES)}, d_k = {D_K}): {worst:.0f}; "
    f"float16 headroom {65504 / worst:.0f}x"
)

fig, (ax_m, ax_h) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
for k, p in enumerate(SHARES):
    look = {"color": figures.ordered_colour(k, len(SHARES)), "marker": "o"}
    ax_m.plot(LENGTHS, sink_logit[p], label=f"sink token, share {p:g}", **look)
    ax_h.plot(LENGTHS, entropy[p], label=f"sink token, share {p:g}", **look)
no_sink = {"color": "black", "marker": "s", "linestyle": "--"}
ax_m.plot(LENGTHS, plain_max, label="no sink, or a sink column", **no_sink)
ax_h.plot(LENGTHS, plain_entropy, label="no sink, or a sink column", **no_sink)
threshold = attnscale.THRESHOLDS["normalized_entropy"]
ax_h.axhline(
    threshold,
    color="0.45",
    linestyle=":",
    linewidth=1,
    label=f"monitor's entropy-collapse threshold ({threshold:g})",
)
for ax in (ax_m, ax_h):
    ax.set_xscale("log", base=2)
    ax.set_xlabel("ordinary keys per row $n$")
ax_m.set_ylabel("max logit of the row")
ax_m.set_title("The sink's logit is the row's max logit")
ax_h.set_ylabel("normalised entropy $H / \\log(n+1)$")
ax_h.set_ylim(0, 1)
ax_h.set_title("A sink lowers the entropy")
figures.one_legend(fig, ncols=3)

# %%
# ## What the monitor makes of a sink head
#
# A causal attention layer written by hand whose first key draws about the share $p = 0.9$ from
# every query, measured by [AttentionMonitor][attnscale.AttentionMonitor] with
# `all_rows=True`; then a head that parks most of each row on the first key as well but gives
# what is left to one earlier key drawn at random for each query; then the share of the first
# design taken by a learned sink column instead. The per-head statistics report, next to the
# entropy, each head's sink key (the key most of its rows put their largest weight on) with
# its mean weight, and the entropy of the rest of each row once the sink is left out; the sink
# column's share is reported as `sink_share`.

L, HEADS = 256, 4


class CausalAttention(torch.nn.Module):
    """Logits from given q and k, an optional learned sink column per head (GPT-OSS)."""

    def __init__(self, sink_column: float | None) -> None:
        super().__init__()
        self.sink = (
            None
            if sink_column is None
            else torch.nn.Parameter(torch.full((HEADS,), sink_column))
        )

    def forward(self, q: torch.Tensor, k: torch.Tensor) -> torch.Tensor:
        logits = q @ k.transpose(-2, -1) / math.sqrt(D_K)  # (1, heads, L, L)
        hidden = torch.ones(L, L, dtype=torch.bool).triu(1)
        logits = logits.masked_fill(hidden, float("-inf"))
        if self.sink is not None:  # appended after the keys, as GPT-OSS does
            column = self.sink.view(1, HEADS, 1, 1).expand(1, HEADS, L, 1)
            logits = torch.cat([logits, column], dim=-1)
        return torch.softmax(logits, dim=-1)


# Every query shares one direction u (the trace of the first token's large hidden
# state); the ordinary keys are orthogonal to it and the first key points along it, so
# q·k_0 is the same for every query: a logit s that takes the share 0.9 of the longest
# row. Rows with fewer keys give it more.
SHARE = 0.9
s_target = math.log(SHARE / (1 - SHARE)) + math.log(L) + 0.5
u = torch.randn(D_K, generator=gen)
u /= u.norm()
q = torch.randn(1, HEADS, L, D_K, generator=gen)
k = torch.randn(1, HEADS, L, D_K, generator=gen)
q, k = q - (q @ u)[..., None] * u, k - (k @ u)[..., None] * u  # orthogonal to u
q = q + math.sqrt(D_K) * u  # the shared component
k_sink = k.clone()
k_sink[:, :, 0] = s_target * u  # q·k_0 / sqrt(d_k) = s_target for every query
# The second design: a sink logit of 13 on the first key, and a logit of 11 on one
# earlier key r(i) per query, drawn at random, far above the ordinary logits (about log
# n + 4 for the longest row): the sink keeps most of each row and the rest goes to that
# one key.
SINK_LOGIT, REST_LOGIT = 13.0, 11.0
k_rest = k.clone()
k_rest[:, :, 0] = SINK_LOGIT * u
rest_key = (
    torch.rand(L, generator=gen) * torch.arange(L)
).long() + 1  # in 1..i (i >= 1)
chosen = k_rest[:, :, rest_key.clamp_max(L - 1)]  # (1, heads, L, d_k): each query's key
extra = REST_LOGIT * math.sqrt(D_K) * chosen / chosen.square().sum(-1, keepdim=True)
extra[:, :, 0] = 0.0  # the first query sees the sink only
q_rest = q + extra
designs = {
    "sink token": (CausalAttention(None), q, k_sink),
    "sink token, one-key rest": (CausalAttention(None), q_rest, k_rest),
    "sink column": (CausalAttention(s_target), q, k),
}
found = {}  # the monitor's findings for each design
for name, (module, queries, keys) in designs.items():
    with torch.no_grad(), attnscale.AttentionMonitor(module, all_rows=True) as monitor:
        weights = module(queries, keys)
    report = monitor.report()
    heads = report.records[0].last.heads
    share = report.records[0].last.sink_share
    print(
        f"{name}: weight on the first key {weights[..., 0].mean():.2f}, sink column "
        f"share " + ("none" if share is None else f"{share:.2f}")
    )
    print(f"  per head: max logit {[round(v, 1) for v in heads['max_logit']]}")
    print(f"            entropy {[round(v, 2) for v in heads['entropy']]}")
    print(f"            sink key {[int(v) for v in heads['sink_key']]}")
    print(f"            sink weight {[round(v, 2) for v in heads['sink_weight']]}")
    print(f"            rest entropy {[round(v, 2) for v in heads['rest_entropy']]}")
    found[name] = [f.code for f in report.findings]
    print("  findings: " + (", ".join(found[name]) or "none"))

# %%
# ## What the measurement says
#
# - **A sink token sets the row's max logit:** to take the share $p$ among $n$ ordinary keys,
#   its logit must sit about $\log\frac{p}{1-p} + \log n$ above theirs, so it grows with the
#   context. It stays within the monitor's large-logit threshold (QK-Clip's $\tau = 100$) at
#   every length measured here, and far from float16's range (the headroom printed above).
# - **A sink lowers the entropy** below the monitor's entropy-collapse threshold once it takes
#   most of the mass, in a healthy head. The monitor therefore finds each head's sink key, the
#   key most of its rows put their largest weight on: the first token here, but a delimiter or
#   a punctuation mark just as well. A head that parks at least half of its mass there
#   (`sink_weight`) is reported as an `attention-sink` (info), and its collapse check reads
#   the rest of each row instead of the whole row. With $p_0$ the row's weight on the sink,
#   $H$ its entropy and $h_b$ the binary entropy, the rest, renormalised, has entropy
#   $H_\text{rest} = (H - h_b(p_0)) / (1 - p_0)$, out of at most $\log(n - 1)$; the monitor
#   averages it over the rows weighted by $1 - p_0$, so a row that is all sink counts for
#   nothing. The first sink head keeps a spread rest and passes. The second is a sink too,
#   but what it leaves of each row goes to one key: its rest is collapsed, and so is the head.
#   Exempting every sink head from the check, as the monitor once did, would have hidden it.
# - **Low entropy by structure is not collapse either.** A head whose rows look at one fixed
#   offset from the query, the previous token or the token itself, has near one-hot rows by
#   design. The monitor counts the rows whose largest weight (past the sink, where the largest
#   is the sink) lies at the head's most common offset, and leaves a head out of the collapse
#   check when that share reaches `positional_share`; a collapsed head whose rows each pick a
#   key at random stays far below it.
# - **A learned sink column, or softmax with $+1$,** takes the same share with no key's logit
#   growing: the max logit and the entropy over the keys stay those of the ordinary logits.
#   The monitor leaves the column out of the keys and reports its share as `sink_share`.
# - **The guide's own trained model has no sink.** Its per-head weights on the first key,
#   and on each head's sink key (whichever key it favours most), printed below, stay near what
#   uniform attention gives, far under `sink_weight`, and its first token's hidden state stays
#   within a small factor of the others' (a massive activation is hundreds of times larger):
#   two layers, and windows cut from the middle of a text with no start token, give it no
#   reason to learn one.

from guide import calibration

trained = calibration.model()
with torch.no_grad(), attnscale.AttentionMonitor(trained, all_rows=True) as monitor:
    for batch in calibration.batches(4):
        hidden = trained(batch, output_hidden_states=True).hidden_states
context = batch.shape[-1]
uniform = sum(1 / (i + 1) for i in range(1, context)) / (
    context - 1
)  # rows with 2+ keys
print(
    f"uniform causal attention puts {uniform:.3f} on the first key (context {context})"
)
for record in monitor.report().records:
    weights = [round(w, 3) for w in record.last.heads["first_key_weight"]]
    print(f"{record.where}: first-key weight per head {weights}")
    keys = [int(k) for k in record.last.heads["sink_key"]]
    weights = [round(w, 3) for w in record.last.heads["sink_weight"]]
    print(
        fold(
            f"{record.where}: sink key per head {keys}, weight on it {weights} (rows "
            f"with 2+ keys)"
        )
    )
print("findings: " + (", ".join(f.code for f in monitor.report().findings) or "none"))
# massive activations would show as a first token far larger than the rest (Sun et al.
# 2024)
first_vs_rest = []
for layer, h in enumerate(hidden):
    first_token, others = h[:, 0].abs().max().item(), h[:, 1:].abs().max().item()
    first_vs_rest.append(first_token / others)
    print(
        f"hidden state {layer}: largest |value| {first_token:.1f} at the first token, "
        f"{others:.1f} elsewhere"
    )

# %%
# ## References
#
# - Xiao et al. 2023, *Efficient Streaming Language Models with Attention Sinks*,
#   arXiv:2309.17453.
# - Sun et al. 2024, *Massive Activations in Large Language Models*, arXiv:2402.17762.
# - Gu et al. 2024, *When Attention Sink Emerges in Language Models: An Empirical View*,
#   arXiv:2410.10781 (a sink's value is small and adds little to the output; no sink emerges
#   with sigmoid attention).
# - OpenAI 2025, *gpt-oss-120b & gpt-oss-20b Model Card*, arXiv:2508.10925 (learned sinks).
