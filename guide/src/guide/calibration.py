"""The monitor on a trained model: false positives on healthy heads, planted bugs caught.

Site-only, no stability promise. The model is the ``trained_lm`` study's stored GPT-2
(`transformers`' code, trained on ``pydoc_data.topics``); its attention modules read their
scale from a ``scaling`` attribute, which is where the bugs are planted.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Callable, Iterator

import torch
from torch import nn

from attnscale._monitor import AttentionMonitor, MonitorReport

from . import stored
from .studies import logit_growth, trained_lm

__all__ = ["PLANTED", "Calibration", "attentions", "batches", "model", "planted", "run"]

#: Planted bugs: the scale each one gives an attention module of head size d in a model of
#: width w.
PLANTED: dict[str, Callable[[int, int], float]] = {
    "no scale": lambda d, w: 1.0,
    "double scaling": lambda d, w: 1.0 / d,
    "scale from the model width": lambda d, w: w**-0.5,
}


def model() -> nn.Module:
    """The stored trained model, in evaluation mode."""
    return trained_lm.trained(stored.load("trained_lm"))


def attentions(m: nn.Module) -> list[nn.Module]:
    """The model's attention modules (those that carry a ``scaling``)."""
    return [a for a in m.modules() if hasattr(a, "scaling") and hasattr(a, "head_dim")]


def batches(n: int, size: int = 16) -> list[torch.Tensor]:
    """``n`` batches of held-out windows (the tenth of the corpus the model never trained on)."""
    data, _ = logit_growth.corpus()
    held_out = data[int(0.9 * data.numel()) :]
    gen = torch.Generator().manual_seed(7)
    context = trained_lm.FULL["context"]
    return [logit_growth.batch(held_out, size, context, gen)[0] for _ in range(n)]


@contextlib.contextmanager
def planted(m: nn.Module, bug: str) -> Iterator[None]:
    """Plant one of [PLANTED][] in every attention module of ``m``, and take it out again."""
    width = trained_lm.FULL["d_model"]
    kept = [(a, a.scaling) for a in attentions(m)]
    try:
        for a, _ in kept:
            d: int = a.head_dim  # type: ignore[assignment]
            a.scaling = PLANTED[bug](d, width)  # type: ignore[assignment]
        yield
    finally:
        for a, scaling in kept:
            a.scaling = scaling


def _monitored(m: nn.Module, xs: list[torch.Tensor]) -> MonitorReport:
    with torch.no_grad(), AttentionMonitor(m) as monitor:
        for x in xs:
            m(x)
    return monitor.report()


def _mean_entropy(report: MonitorReport) -> float:
    values = [s.normalized_entropy for r in report.records for s in r.series]
    return sum(values) / len(values)


@dataclasses.dataclass
class Calibration:
    """What the monitor reported on the trained model, healthy and with each planted bug."""

    healthy: MonitorReport
    initial_entropy: float  # mean normalised entropy of the same model untrained
    planted: dict[str, set[str]]  # finding codes at warning or above, per planted bug

    @property
    def healthy_warnings(self) -> list[str]:
        return [f"{f.code} at {f.where}" for f in self.healthy.findings if f.severity != "info"]

    @property
    def healthy_report(self) -> str:
        return str(self.healthy)

    @property
    def trained_entropy(self) -> float:
        return _mean_entropy(self.healthy)


def run(n_batches: int = 8) -> Calibration:
    """Monitor the trained model on ``n_batches`` held-out batches, then plant each bug."""
    m = model()
    xs = batches(n_batches)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        untrained = trained_lm.gpt2(trained_lm.FULL).eval()
    return Calibration(
        healthy=_monitored(m, xs),
        initial_entropy=_mean_entropy(_monitored(untrained, xs)),
        planted={bug: _plant_and_monitor(m, bug, xs[:1]) for bug in PLANTED},
    )


def _plant_and_monitor(m: nn.Module, bug: str, xs: list[torch.Tensor]) -> set[str]:
    with planted(m, bug):
        return _monitored(m, xs).codes("warning")
