r"""
# In plain PyTorch: dropping the scale is a change of Adam's settings

The identity at the heart of this section, as code to copy: no attnscale import, under 30
lines. A one-head attention layer trained with Adam, with $1/\sqrt{d_k}$, is the same model as
the layer without it whose $W_q$ and $W_k$ start $d_k^{1/4}$ times smaller and train with a
learning rate $d_k^{1/4}$ times smaller and an $\epsilon$ $d_k^{1/4}$ times larger (the
derivation is on
[the reparametrisation page](plot_05_reparametrisation.md)). The code trains both side by side in
float64 and returns how far apart their logits end; the last cell checks the layer against the
library.
"""

import torch


def train_pair(
    d_model=32, d_k=64, steps=50, lr=1e-2, eps=1e-8, transform=True
) -> float:
    """Largest gap between the logits of the scaled model and of the unscaled one,
    relative to their size, after ``steps`` Adam steps on the same batches (float64)."""
    torch.manual_seed(0)
    c = d_k**-0.25
    w = torch.randn(2, d_k, d_model, dtype=torch.float64) / d_model**0.5  # W_q, W_k
    settings = {"lr": lr * c, "eps": eps / c} if transform else {}
    models = []
    for scale, weights, qk in ((d_k**-0.5, w, {}), (1.0, c * w, settings)):
        weights = weights.clone().requires_grad_()
        opt = torch.optim.Adam([{"params": [weights], **qk}], lr, eps=eps)
        models.append((scale, weights, opt))
    for _ in range(steps):
        x = torch.randn(16, 8, d_model, dtype=torch.float64)  # (batch, tokens, d_model)
        target = torch.randn(16, 8, 8, dtype=torch.float64)
        target = target.softmax(-1)  # weights to fit
        logits = []
        for scale, weights, opt in models:
            q, k = x @ weights[0].T, x @ weights[1].T  # (batch, tokens, d_k)
            s = scale * q @ k.transpose(-2, -1)  # (batch, tokens, tokens)
            opt.zero_grad()
            (s.softmax(-1) - target).square().mean().backward()
            opt.step()
            logits.append(s.detach())
    return ((logits[0] - logits[1]).abs().max() / logits[0].abs().max()).item()


# %%
# ## Using it

print(f"with Adam's settings transformed: relative gap {train_pair():.1e}")
print(
    f"with the same settings for both:  relative gap {train_pair(transform=False):.1e}"
)

# %%
# ## Checked against the library
#
# The layer's logits, $q k^\top / \sqrt{d_k}$ and the unscaled $q' k'^\top$ with
# $q' = c\,q$, $k' = c\,k$, against
# [scaled_dot_product_attention][attnscale.scaled_dot_product_attention] with the strategies
# `inverse_sqrt` and `none`: both are the same logits.

import attnscale

gen = torch.Generator().manual_seed(1)
q, k, v = (
    torch.randn(2, 1, 8, 64, generator=gen, dtype=torch.float64) for _ in range(3)
)
c = 64**-0.25
scaled = attnscale.scaled_dot_product_attention(q, k, v, need_logits=True).logits
unscaled = attnscale.scaled_dot_product_attention(
    c * q, c * k, v, strategy="none", need_logits=True
).logits
print(f"ours vs inverse_sqrt: {(q @ k.transpose(-2, -1) / 8 - scaled).abs().max():.1e}")
print(f"inverse_sqrt vs none on c q, c k: {(scaled - unscaled).abs().max():.1e}")
