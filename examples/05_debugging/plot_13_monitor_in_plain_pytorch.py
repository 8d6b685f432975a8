r"""
# In plain PyTorch: per-head max logit, entropy and QK-Clip

The numbers this section watches, in code to copy into a training loop: no attnscale import,
under 30 lines. Given one layer's queries and keys, it returns per head the largest logit
(signed, as QK-Clip and cuDNN's `return_max_logit` define it), the mean entropy as a fraction
of $\log n$ for $n$ visible keys, and the factor $\gamma = \min(1, \tau / S_{\max})$ that QK-Clip
would apply. It forms the full $L \times L$ logits, which is fine for a check every few hundred
steps; [head_stats][attnscale.head_stats] computes the same in steps of bounded size. The last
cell checks it against the library.
"""

import torch


def attention_health(
    q, k, scale=None, causal=False, tau=100.0
) -> dict[str, torch.Tensor]:
    """q, k: (batch, heads, length, d_k). Per head: max logit, entropy / log n, QK-Clip
    factor."""
    length = q.shape[-2]
    scale = q.shape[-1] ** -0.5 if scale is None else scale
    logits = scale * q.double() @ k.double().transpose(-2, -1)  # (batch, heads, L, L)
    if causal:  # query i sees keys 0..i
        hidden = torch.ones(length, length, dtype=torch.bool).triu(1)
        logits = logits.masked_fill(hidden, float("-inf"))
    max_logit = logits.amax(dim=(0, 2, 3))  # (heads,): signed, may be <= 0
    p = logits.softmax(dim=-1)
    entropy = -torch.where(p > 0, p * p.log(), 0.0).sum(-1)  # (batch, heads, L)
    visible = torch.arange(1, length + 1) if causal else torch.full((length,), length)
    rows = visible >= 2  # a row with one key has no entropy to lose
    normalised = entropy[..., rows] / visible[rows].double().log()
    return {
        "max_logit": max_logit,
        "entropy": normalised.mean(dim=(0, 2)),
        "qk_clip_factor": torch.where(max_logit > tau, tau / max_logit, 1.0),
    }


# %%
# ## Using it
#
# The same random queries and keys at growing sizes, as when attention logits grow during
# training: the max logit grows with the square of the size, the entropy falls, and QK-Clip
# starts to act once a head's max logit passes $\tau = 100$.

gen = torch.Generator().manual_seed(0)
q, k = (
    torch.randn(2, 4, 128, 64, generator=gen),
    torch.randn(2, 4, 128, 64, generator=gen),
)
for size in (1, 3, 6):
    health = attention_health(size * q, size * k, causal=True)
    print(f"q, k times {size}: entropy / log n {health['entropy'].mean():.2f}")
    print(f"  max logit per head {[round(v, 1) for v in health['max_logit'].tolist()]}")
    print(
        f"  QK-Clip factors    "
        f"{[round(v, 2) for v in health['qk_clip_factor'].tolist()]}"
    )

# %%
# ## Checked against the library
#
# [head_stats][attnscale.head_stats] computes the same per-head statistics in steps of at most
# about a million logits by default: blocks of whole rows where a row of every head fits, else
# chunks of keys with an online softmax. Its memory stays bounded however long the sequence,
# though at this size one step holds every logit. The largest difference:

import attnscale

print(f"logits per call: {q.shape[0] * q.shape[1] * q.shape[2] * k.shape[2]}")
for size in (1, 6):
    ours = attention_health(size * q, size * k, causal=True)
    theirs = attnscale.head_stats(size * q, size * k, is_causal=True)
    for name, reference in (
        ("max_logit", theirs.max_logit),
        ("entropy", theirs.entropy),
        ("qk_clip_factor", theirs.qk_clip_factor(100.0)),
    ):
        print(
            f"times {size}, {name:<15} largest difference "
            f"{(ours[name] - reference).abs().max():.1e}"
        )
