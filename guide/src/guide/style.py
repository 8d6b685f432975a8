"""The site's figure style, and one table of colours and labels for the scaling strategies.

Every figure of the guide is drawn after [use_style][guide.style.use_style], and every
figure that shows a scaling strategy takes its colour and its label from ``STRATEGIES``, so a
strategy looks the same in every section.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import matplotlib.pyplot as plt

__all__ = [
    "SCORING",
    "STRATEGIES",
    "STYLE",
    "VARIANTS",
    "StrategyLook",
    "colours",
    "labels",
    "strategy_kwargs",
    "text_labels",
    "use_style",
]

#: The style file (a matplotlib ``.mplstyle``) that ships inside the package.
STYLE = Path(__file__).with_name("attnscale.mplstyle")


class StrategyLook(NamedTuple):
    """How one scaling strategy is drawn: its display label and its colour."""

    label: str
    colour: str


#: Every strategy of [SCALING_STRATEGIES][attnscale.SCALING_STRATEGIES], by name. The reference
#: (1/√d_k) is blue and the missing scale vermillion, as in the style's first two colours; no
#: two strategies share a colour.
STRATEGIES: dict[str, StrategyLook] = {
    "inverse_sqrt": StrategyLook("$1/\\sqrt{d_k}$", "#0072B2"),
    "none": StrategyLook("no scale", "#D55E00"),
    "inverse_d": StrategyLook("$1/d_k$", "#009E73"),
    "learnable_temperature": StrategyLook("learnable temperature", "#CC79A7"),
    "qk_layernorm": StrategyLook("QK-LayerNorm", "#E69F00"),
    "qk_rmsnorm": StrategyLook("QK-RMSNorm", "#56B4E9"),
    "cosine": StrategyLook("cosine (learnable $\\tau$)", "#000000"),
    "folded_init": StrategyLook("folded init (T5)", "#999999"),
}


#: Variants drawn beside the strategies: a strategy with one more switch.
VARIANTS: dict[str, StrategyLook] = {
    "softcap_50": StrategyLook("$1/\\sqrt{d_k}$ + soft-cap 50", "#882255"),
    "none_matched": StrategyLook("no scale, matched init", "#AA4499"),
    # the fixes for logit growth that section 4 trains (each with 1/sqrt(d_k))
    "sigma_reparam": StrategyLook("σReparam", "#117733"),
    "qk_clip": StrategyLook("QK-Clip", "#44AA99"),
    "softcap": StrategyLook("soft-cap 50", "#882255"),  # softcap_50, named as the fix
    "no_z_loss": StrategyLook("no z-loss", "#CC6677"),
    "muon": StrategyLook("Muon", "#332288"),
    "muon_qk_clip": StrategyLook("Muon + QK-Clip", "#661100"),
    # weight decay's strength, against the recipe's 1e-4 per step (1/sqrt(d_k) alone)
    "no_decay": StrategyLook("no weight decay", "#DDAA33"),
    "decay_x10": StrategyLook("weight decay ×10", "#BB5566"),
}


#: Scoring functions other than the dot product, drawn beside the strategies (colours that no
#: strategy or variant uses).
SCORING: dict[str, StrategyLook] = {
    "additive": StrategyLook("additive (Bahdanau)", "#999933"),
}


def use_style() -> None:
    """Apply the site's style to every figure drawn from now on."""
    plt.style.use(STYLE)


def _looks(names: Iterable[str]) -> dict[str, StrategyLook]:
    table = {**STRATEGIES, **VARIANTS, **SCORING}
    return {n: table[n] for n in names if n in table}


def labels(names: Iterable[str]) -> dict[str, str]:
    """Display labels of the strategies and variants among ``names``, by name."""
    return {n: look.label for n, look in _looks(names).items()}


# matplotlib mathtext in the labels, as plain Unicode for HTML tables and printed text.
_MATHTEXT = {"$": "", "\\sqrt{d_k}": "√d_k", "\\tau": "τ", "\\eta": "η"}


def text_labels(names: Iterable[str]) -> dict[str, str]:
    """The same labels as [labels][guide.style.labels], without mathtext."""
    out = labels(names)
    for name, label in out.items():
        for tex, text in _MATHTEXT.items():
            label = label.replace(tex, text)
        out[name] = label
    return out


def colours(names: Iterable[str]) -> dict[str, str]:
    """Colours of the strategies and variants among ``names``, by name."""
    return {n: look.colour for n, look in _looks(names).items()}


def strategy_kwargs() -> dict[str, dict[str, str]]:
    """``colors=`` and ``labels=`` for a plot helper whose series are keyed by strategy name."""
    names = [*STRATEGIES, *VARIANTS, *SCORING]
    return {"colors": colours(names), "labels": labels(names)}
