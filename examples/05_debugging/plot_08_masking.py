r"""# Masks: -1e9, -inf and rows with nothing to attend to

A mask removes keys from the softmax by pushing their logits to $-\infty$ or to a large
negative number. Which of the two a code base writes decides what happens in float16 and what a
query row with no valid key returns. This page runs each variant, in float32 and float16, and
shows what the monitor makes of masked logits.
"""

# %%
SEED = 0
BATCH, HEADS, SEQ, D_HEAD = 1, 2, 6, 16
PAD = 2  # left padding: the first PAD positions of the sequence are padding
FILLS = {
    "-inf": float("-inf"),
    "-1e9": -1e9,
    "finfo.min": None,
}  # None: the dtype's minimum

import math

import matplotlib.pyplot as plt
import torch
from torch.nn import functional as F

import attnscale
from attnscale import AttentionMonitor
from guide.style import use_style

use_style()
torch.manual_seed(SEED)

# %%
# ## The masks
#
# Two masks are common. A **padding mask** hides the keys past each sequence's length (d2l's
# `masked_softmax` takes the valid lengths and writes $-10^6$ into the hidden logits). A
# **causal mask** hides the keys after each query. Both are boolean here, True where a key
# takes part, as in `torch.nn.functional.scaled_dot_product_attention`. With left padding (what
# batched generation uses) and a causal mask together, the padded query positions see only
# padding keys: their rows have **no valid key at all**.

positions = torch.arange(SEQ)
padding = positions >= PAD  # (seq,) True for real tokens
causal = torch.ones(SEQ, SEQ, dtype=torch.bool).tril()  # (q, k) query i sees keys 0..i
allowed = causal & padding[None, :]  # (q, k)
print("allowed keys per query row (1 = takes part):")
print(allowed.int())
print("query rows with no valid key:", [i for i in range(SEQ) if not allowed[i].any()])

q = torch.randn(BATCH, HEADS, SEQ, D_HEAD)
k = torch.randn(BATCH, HEADS, SEQ, D_HEAD)
v = torch.randn(BATCH, HEADS, SEQ, D_HEAD)


def handwritten(q: torch.Tensor, k: torch.Tensor, fill: float | None) -> torch.Tensor:
    """Attention weights as many code bases write them: scale, fill the masked logits,
    softmax."""
    scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])  # (b, heads, q, k)
    value = torch.finfo(scores.dtype).min if fill is None else fill
    scores = scores.masked_fill(~allowed, value)
    return torch.softmax(scores.float(), dim=-1).to(q.dtype)  # (b, heads, q, k)


# %%
# ## Float16 cannot hold -1e9
#
# The largest float16 magnitude is 65504, so $-10^9$ (and d2l's $-10^6$) have no float16 value.
# What happens then depends on how the fill is written: `masked_fill` with a Python number
# refuses, other writes round it to $-\infty$ without a word, and bfloat16 (whose range is
# float32's) keeps it finite.

half = torch.zeros(3, dtype=torch.float16)
hide = torch.tensor([False, True, True])


def try_write(write) -> str:
    try:
        return str(write().tolist())
    except RuntimeError as error:
        return f"RuntimeError: {error}"


writes = {
    "x.masked_fill(m, -1e9)": lambda: half.masked_fill(hide, -1e9),
    "x[m] = -1e6  (d2l)": lambda: half.index_put(
        (hide,), torch.tensor(-1e6, dtype=half.dtype)
    ),
    "torch.where(m, -1e9, x)": lambda: torch.where(hide, -1e9, half),
    "float32 mask of -1e9, .half()": lambda: (
        torch.zeros(3).masked_fill(hide, -1e9).half()
    ),
    "two finfo.min masks added": lambda: (
        half.masked_fill(hide, torch.finfo(half.dtype).min)
        + half.masked_fill(hide, torch.finfo(half.dtype).min)
    ),
    "bfloat16 masked_fill(m, -1e9)": lambda: (
        half.bfloat16().masked_fill(hide, -1e9).float()
    ),
}
print(f"float16 range: +-{torch.finfo(torch.float16).max:.0f}")
for name, write in writes.items():
    line = f"{name:<32} -> {try_write(write)}"
    if len(line) > 88:  # a long error goes on a line of its own
        line = f"{name}\n    -> {try_write(write)}"
    print(line)

# %%
# Inside the softmax the three fills agree wherever a row has at least one valid key:
# $e^{-10^9 - \max}$ is exactly 0 in any float format, as is $e^{-\infty}$. So the weights, and
# the gradients (a masked key has weight 0, so its logit gets gradient 0), are the same. They
# differ only in the rows with no valid key.

for dtype in (torch.float32, torch.float16):
    qs, ks = q.to(dtype), k.to(dtype)
    reference = handwritten(qs, ks, float("-inf"))
    for name, fill in FILLS.items():
        if dtype == torch.float16 and fill == -1e9:
            continue  # masked_fill refuses it, see above
        w = handwritten(qs, ks, fill)
        live = allowed.any(dim=-1)  # (q,) rows with a valid key
        diff = (w - reference)[..., live, :].abs().max().item()
        print(
            f"{dtype!s:<14} fill {name:<10} rows with a valid key: max |w - w(-inf)| = "
            f"{diff}"
        )

# %%
# ## Rows with no valid key
#
# A softmax over logits that are all $-\infty$ is $0/0$: NaN, and the NaN spreads through the
# output into the loss and into the gradient of everything it multiplies (counted below). A
# finite fill makes the row **uniform** over the masked keys instead: no NaN, but the padded
# query now averages the padding's values. Torch's `scaled_dot_product_attention` returns zeros
# for such rows (checked below, in this version of torch), and so does
# [scaled_dot_product_attention][attnscale.scaled_dot_product_attention].

rows = {}
for name, fill in FILLS.items():
    rows[f"hand-written, fill {name}"] = handwritten(q, k, fill)
ours = attnscale.scaled_dot_product_attention(
    q, k, v, attn_mask=allowed, need_weights=True
)
rows["attnscale, torch SDPA (zeros)"] = ours.weights

dead = ~allowed.any(dim=-1)  # (q,)
out_torch = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
print("the weights of a no-valid-key row:")
for name, w in rows.items():
    print(f"{name:<30} {[round(x, 3) for x in w[0, 0, 0].tolist()]}")
print(
    "torch SDPA output of the no-valid-key rows is zero:",
    bool((out_torch[..., dead, :] == 0).all()),
)

# The NaN in the forward pass: the loss is NaN, and so is the gradient of what the NaN
# rows multiply (here the values; the logits' gradient is cut by masked_fill, which
# fills every entry of such a row).
q_grad, v_grad = q.clone().requires_grad_(), v.clone().requires_grad_()
loss = (handwritten(q_grad, k, float("-inf")) @ v_grad).sum()
loss.backward()
print(
    f"hand-written, fill -inf: loss = {loss.item()}, NaN entries in dL/dv: "
    f"{int(v_grad.grad.isnan().sum())} of {v_grad.numel()}"
)

fig, axes = plt.subplots(
    1, len(rows), figsize=(7, 2.3), layout="constrained", sharey=True
)
cmap = plt.get_cmap("viridis").with_extremes(bad="#d62728")
for ax, (name, w) in zip(axes, rows.items(), strict=True):
    image = ax.imshow(w[0, 0].numpy(), cmap=cmap, vmin=0, vmax=1)
    for i in torch.nonzero(dead).flatten().tolist():
        if w[0, 0, i].isnan().all():
            ax.text(
                SEQ / 2 - 0.5,
                i,
                "NaN",
                ha="center",
                va="center",
                color="white",
                fontsize=8,
            )
    ax.set_title(name.replace(", ", ",\n"), fontsize=8)
    ax.set_xlabel("key position")
    ax.set_xticks(range(SEQ))
    ax.grid(False)
axes[0].set_ylabel("query position")
fig.colorbar(image, ax=axes, shrink=0.8, label="weight")

# %%
# ## What the monitor counts as masked
#
# [AttentionMonitor][attnscale.AttentionMonitor] reads a mask from the mask tensor, not from
# the logits' values: a boolean mask, a `masked_fill` or `torch.where` with a negative fill, or
# an additive mask (a tensor of 0 and one negative value) added to the scores or passed to SDPA
# or `nn.MultiheadAttention`. The positions it masks are left out of the logit statistics
# (otherwise a $-10^9$ fill would make the logit range look enormous), counted in
# `masked_fraction`, and a row with no valid key is reported as `masked-rows`. So Swin's $-100$
# is a mask just as $-10^9$ is. What a finite fill can still get wrong is the size: not far
# enough below the row's logits, it leaves the masked keys some probability. The monitor
# measures that share (`mask_leak`, the largest over the sampled rows) and reports
# `leaky-mask` above the `mask_leak` threshold. Only where the path from the mask to the
# softmax goes through an operation the monitor does not follow does it fall back on the
# values: logits at or below `mask_value` ($-10^4$ by default, see
# [THRESHOLDS][attnscale.THRESHOLDS]) then count as masked.


def monitored(fill: float) -> attnscale.MonitorReport:
    with AttentionMonitor() as monitor:
        handwritten(q, k, fill)
    return monitor.report()


for label, fill in {"-1e9": -1e9, "-100": -100.0, "-2": -2.0}.items():
    report = monitored(fill)
    s = report.records[0].last
    print(
        f"fill {label:<5} masked fraction {s.masked_fraction:.2f}, logit std "
        f"{s.logit_std:.2f}, mask leak {s.mask_leak:.2g},\n"
        f"{'':11}findings: {sorted(report.codes('info'))}"
    )

print()
print(monitored(float("-inf")))

# %%
# ## Checklist
#
# - Mask with $-\infty$ or `torch.finfo(dtype).min` written in the tensor's own dtype, not with
#   a constant such as $-10^9$ that float16 cannot hold.
# - Adding two `finfo.min` masks gives $-\infty$ in float16: combine masks as booleans first.
# - Decide what a query with no valid key returns (zeros, as SDPA does, is the safe choice) and
#   make sure no NaN can come out of it; or drop such rows from the loss.
# - Masking does not change the scale: $1/\sqrt{d_k}$ acts on the valid logits only, and the
#   monitor's logit statistics leave the masked ones out.
#
# ## References
#
# - Zhang, Lipton, Li, Smola, *Dive into Deep Learning*, "Attention Scoring Functions" (masked
#   softmax operation).
# - PyTorch, `torch.nn.functional.scaled_dot_product_attention` (boolean `attn_mask`: True takes
#   part).
