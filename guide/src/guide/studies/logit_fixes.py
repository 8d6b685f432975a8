r"""The fixes for attention logit growth that the guide recommends, trained.

The language model, corpus, recipe, learning rates and seeds of ``logit_growth`` (two pre-LN
blocks of width 128 on CPython's help topics, AdamW, warmup then cosine decay, 2,000 steps,
learning rates $10^{-4}$ to $1$ half a decade apart, three seeds), with $1/\sqrt{d_k}$ and one
change each:

- ``softcap``: $50\tanh(s/50)$ on the attention logits (Gemma 2's attention cap). The kept
  largest logit is the capped one, which the softmax sees.
- ``sigma_reparam``: every linear layer's weight reparametrised as $\gamma\,W/\sigma(W)$
  (Zhai et al. 2023, arXiv:2303.06296), $\sigma$ by one power iteration per step
  (``torch.nn.utils.parametrizations.spectral_norm``), $\gamma$ a learned scalar from 1.
- ``qk_clip``: after each step, each head whose largest logit in that step's batch passed
  $\tau = 100$ has its $W_q$ and $W_k$ rows (and biases) multiplied by $\sqrt{\tau/S_{\max}}$,
  as Kimi K2's MuonClip does (arXiv:2507.20534).
- ``no_z_loss``: the recipe without its z-loss on the output softmax, to measure what it adds.
- ``muon``: the blocks' matrices trained with ``torch.optim.Muon`` (Nesterov momentum 0.95,
  five Newton-Schulz steps, the update's RMS matched to AdamW's as in Liu et al. 2025,
  arXiv:2502.16982, so that the same rate grid applies; the same decoupled decay per step);
  embeddings, positions, head, norms and biases with the recipe's AdamW.
- ``muon_qk_clip``: both (MuonClip).

The baseline is ``logit_growth``'s stored ``inverse_sqrt`` run: the same seeds and batches.
"""

# mypy: disable-error-code="union-attr, operator, arg-type"
# (a TinyLM block's ``attn`` is typed Tensor | Module; a cast would change the code hash)
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch import nn
from torch.nn.utils import parametrize
from torch.nn.utils.parametrizations import spectral_norm

from .. import stored
from . import MODEL_CODE, logit_growth

FULL: dict[str, Any] = {
    **logit_growth.FULL,
    "variants": ["sigma_reparam", "qk_clip", "softcap", "no_z_loss", "muon", "muon_qk_clip"],
    "softcap": 50.0,
    "tau": 100.0,
}
#: The build's rerun and the fingerprint: the first 100 steps of every variant at η = 0.01, the
#: rerun of ``logit_growth``. Not at the large rates where QK-Clip and the cap bind: there the
#: runs are chaotic within 100 steps (at η = 0.1 they part by 5-60% between arithmetics, at
#: η = 1 by tens of percent within 40 steps; σReparam alone stays within 1e-6), so no
#: tolerance could tell another CPU from changed code (``python -m guide.stored spread``).
REDUCED: dict[str, Any] = {
    **FULL,
    "halves": [-4],
    "seeds": [0],
    "stop_after": 100,
    "eval_batches": 4,
}


class Gain(nn.Module):
    """σReparam's learned scalar γ, applied after the spectral normalisation."""

    def __init__(self) -> None:
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(()))

    def forward(self, weight: torch.Tensor) -> torch.Tensor:
        return self.gamma * weight


def sigma_reparam(model: nn.Module) -> None:
    """Every linear layer's weight becomes γ W / σ(W)."""
    for module in model.modules():
        if isinstance(module, nn.Linear):
            spectral_norm(module)
            parametrize.register_parametrization(module, "weight", Gain())


def qk_clip(tau: float) -> Any:
    """QK-Clip at threshold ``tau``: per head, scale W_q and W_k by sqrt(tau / S_max) where the
    step's largest logit S_max passed tau, so that the same inputs give logits at most tau."""

    def clip(model: logit_growth.TinyLM, head_max: list[torch.Tensor]) -> None:
        for block, peak in zip(model.blocks, head_max, strict=True):
            attn = block.attn
            # (heads,); 1 where the head stayed at or below tau (a negative peak among them)
            factor = torch.where(peak > tau, tau / peak, torch.ones_like(peak))
            if bool((factor < 1).any()):
                rows = factor.sqrt().repeat_interleave(attn.head_dim)  # (heads * d_k,)
                for proj in (attn.q_proj, attn.k_proj):
                    proj.weight.mul_(rows[:, None])
                    if proj.bias is not None:
                        proj.bias.mul_(rows)

    return clip


def muon(
    model: logit_growth.TinyLM, lr: float, budget: dict[str, Any]
) -> list[torch.optim.Optimizer]:
    """Muon on the blocks' matrices, the recipe's AdamW on every other parameter."""
    hidden = [p for p in model.blocks.parameters() if p.dim() == 2]
    taken = {id(p) for p in hidden}
    rest = [p for p in model.parameters() if id(p) not in taken]
    return [
        torch.optim.Muon(
            hidden,
            lr=lr,
            weight_decay=budget["weight_decay"] / lr,
            adjust_lr_fn="match_rms_adamw",
        ),
        logit_growth.adamw(rest, lr, budget),
    ]


def recipe(variant: str, budget: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The budget and the ``train_lm`` keywords of one variant."""
    clip = qk_clip(budget["tau"])
    changes: dict[str, dict[str, Any]] = {
        "softcap": {"softcap": budget["softcap"]},
        "sigma_reparam": {"prepare": sigma_reparam},
        "qk_clip": {"after_step": clip},
        "no_z_loss": {},
        "muon": {"optimizers": muon},
        "muon_qk_clip": {"optimizers": muon, "after_step": clip},
    }
    if variant not in changes:
        raise ValueError(f"variant must be one of {', '.join(changes)}, got {variant!r}")
    if variant == "no_z_loss":
        budget = {**budget, "z_loss": 0.0}
    return budget, changes[variant]


def run_part(part: str, budget: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    return logit_growth.run_variant(part, budget, device, recipe)


#: ``logit_growth``'s (the same arrays of the same model), checked with ``python -m guide.stored
#: spread logit_fixes`` on an Intel Xeon with AVX-512, 2026-12-06, across its six arithmetics:
#: the worst array lay at 0.09 of its tolerance (Muon's largest logit), and the planted change
#: (every Adam step 1% larger) moved every part's loss by 12 to 15 tolerances.
TOLERANCES: stored.Tolerances = logit_growth.TOLERANCES


EXPERIMENT = stored.Experiment(
    name="logit_fixes",
    parts=logit_growth.parts,
    run_part=run_part,
    full=FULL,
    reduced=REDUCED,
    agree=logit_growth.agree,
    uses=(logit_growth, *MODEL_CODE),
)
