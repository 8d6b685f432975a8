"""A monitor over a training run: which steps are measured, how many points each site keeps,
and what is handed to the user's logger at the end of each measured step.

The step follows the optimizer when one is given (a post-hook on ``optimizer.step``, so
gradient accumulation counts one step per update), and otherwise the calls of the monitored
model. The optimizer's hook stays for the monitor's life, not only while its block runs: a
loop that enters the monitor around each step, or steps the optimizer outside it, still
counts every step, and each measured step is logged once, when the optimizer takes it.

Memory is bounded by ``history``: each site keeps at most that many points, evenly spread
over the run. When a site's list is full, every other point is dropped and the site keeps one
call in two from then on (then one in four ...), so the list always spans the whole run at
one spacing. Running aggregates would use less memory, but the curves (a max logit
that grows, an entropy that falls) are what the guide's checklist asks to look at.

Under ``torch.distributed``, each process measures its own batches, and at the end of each
measured step the processes' scalars are combined before the log hook sees them (the largest
of maxima, the smallest of minima, the mean of means), so the hook gets the same dict on every
process; every process must run the monitor, with or without a ``log``. The calls a site makes
in one step (micro-batches of gradient accumulation) are combined the same way first, so a
logged max logit covers the whole step's batch, as Megatron-LM's and QK-Clip's do.

Every site's scalars go in one tensor per kind of reduction: one ``all_reduce(MAX)`` (minima
negated) and one ``all_reduce(SUM)`` (sums and counts) per measured step, whatever the number
of layers, as torchtitan reduces its MoE layers' counts (Megatron-LM's QK-Clip takes one per
layer). The processes agree on the keys once, and again only when one of them meets a key the
others have not sent (a site that runs on some batches only): a key missing on a process is
left out of its reduction, not taken as 0.
"""

from __future__ import annotations

import math
import re
import weakref
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

import torch

from .metric_names import LOG_NAMES

if TYPE_CHECKING:
    from .report import AttentionRecord, AttentionStats

__all__ = ["LOGGED", "Run"]

# what the log hook receives per site, from the sampled statistics
LOGGED = (
    "max_abs_logit",
    "logit_std",
    "normalized_entropy",
    "min_head_normalized_entropy",
    "saturated_fraction",
    "logit_grad_norm",
)

Log = Callable[[dict[str, float]], Any]
_HEAD_MAX = re.compile(r"/head\d+/max_logit$")  # a per-head max logit's key


class Schedulable(Protocol):
    """The one thing a run changes in its monitor: whether the next steps are measured."""

    def set_measuring(self, on: bool) -> None: ...

    def flush(self) -> None: ...


class Run:
    """The step counter, the measuring schedule, the history bound and the log hook."""

    def __init__(
        self,
        capture: Schedulable,
        *,
        every: int,
        history: int | None,
        optimizer: torch.optim.Optimizer | None,
        log: Log | None,
        qk_clip_tau: float,
        log_names: str = "attnscale",
    ) -> None:
        # weakly: the optimizer's hook outlives a block, and must not keep a dropped monitor
        # (and the hook's collective, under torch.distributed) alive until a garbage collection
        self._capture = weakref.ref(capture)
        self.every, self.history, self.log, self.qk_clip_tau = every, history, log, qk_clip_tau
        assert log_names in LOG_NAMES, log_names  # AttentionMonitor checks it for the user
        self.log_names = log_names
        self._reduce = _Reducer()
        self.step = 0
        self.model_calls = 0
        self.optimizer = optimizer
        self._kept: dict[int, tuple[int, int]] = {}  # per record: (calls, stride)
        # per record: its calls in its latest measured step, kept or not
        self._latest: dict[int, tuple[str, list[AttentionStats]]] = {}
        self._handle: Any = None
        self._logged_step = -1
        self.open()

    # -- steps ------------------------------------------------------------------

    def on_model_call(self) -> None:
        """A monitored model starts a forward pass: without an optimizer, a new step."""
        if self.optimizer is None:
            if self.model_calls:
                self._end_step()
                self.step += 1
            self.model_calls += 1
            self._gate()

    def _optimizer_step(self, *_: Any) -> None:
        capture = self._capture()
        if capture is not None:
            capture.flush()  # the step's calls, measured before the step is logged
        self._end_step()
        self.step += 1
        self._gate()

    def _gate(self) -> None:
        capture = self._capture()
        if capture is not None:
            capture.set_measuring(self.step % self.every == 0)

    def open(self) -> None:
        """The monitor's block starts (again): follow the optimizer, measure if due."""
        if self.optimizer is not None and self._handle is None:
            run = weakref.ref(self)

            def on_step(*_: Any) -> None:
                alive = run()
                if alive is not None:
                    alive._optimizer_step()

            self._handle = self.optimizer.register_step_post_hook(on_step)
            weakref.finalize(self, self._handle.remove)  # the monitor is gone: so is the hook
        self._gate()

    def close(self) -> None:
        """The monitor's block ends. Without an optimizer, the step of the last model call is
        logged now; with one, when the optimizer takes it (the step may not be over)."""
        if self.optimizer is None:
            self._end_step()

    # -- history ------------------------------------------------------------------

    def keep(self, record: AttentionRecord, stats: AttentionStats) -> bool:
        """Whether this call's point is kept, thinning the site's points when it is full.
        The log hook sees every measured call's statistics, kept or not."""
        where, this_step = self._latest.get(id(record), (record.where, []))
        if this_step and this_step[-1].run_step != stats.run_step:
            this_step = []  # a new step
        self._latest[id(record)] = (where, [*this_step, stats])
        if self.history is None:
            return True
        calls, stride = self._kept.get(id(record), (0, 1))
        self._kept[id(record)] = (calls + 1, stride)
        if calls % stride:
            return False
        if len(record.series) >= self.history:
            del record.series[1::2]
            self._kept[id(record)] = (calls + 1, 2 * stride)
            return calls % (2 * stride) == 0
        return True

    # -- the log hook ---------------------------------------------------------------

    def _end_step(self) -> None:
        if self._logged_step == self.step or self.step % self.every:
            return  # logged, or not measured on any process (they share the schedule)
        self._logged_step = self.step
        distributed = _world() > 1
        if self.log is None and not distributed:
            return
        scalars = self.scalars(self.step)
        if distributed:  # every process takes part, whether it logs or not
            scalars = self._reduce(scalars)
        if scalars and self.log is not None:
            self.log(scalars)

    def scalars(self, step: int) -> dict[str, float]:
        """The flat dict the log hook receives for ``step``: ``attn/<site>/<statistic>``,
        finite values only, and ``attn/step``. Empty if nothing was measured at that step."""
        out: dict[str, float] = {}
        for where, calls in self._latest.values():
            if calls[-1].run_step == step:
                out.update(_combined([_site_scalars(where, s, self.qk_clip_tau) for s in calls]))
        if out and self.log_names == "megatron":
            out.update(_megatron(out))
        if out:
            out["attn/step"] = float(step)
        return out


def _world() -> int:
    dist = torch.distributed
    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _megatron(scalars: dict[str, float]) -> dict[str, float]:
    """Megatron-LM's ``max_attention_logit``: the largest per-head max logit of every site,
    from a running max that starts at 0 (so never below 0). See ``metric_names``."""
    heads = [v for k, v in scalars.items() if _HEAD_MAX.search(k)]
    return {"max_attention_logit": max([0.0, *heads])} if heads else {}


def _combined(calls: list[dict[str, float]]) -> dict[str, float]:
    """One site's scalars over its calls in a step (micro-batches): the largest of maxima, the
    smallest of minima and QK-Clip factors, the mean of the rest, as across processes."""
    if len(calls) == 1:
        return calls[0]
    values: dict[str, list[float]] = {}
    for call in calls:
        for k, v in call.items():
            values.setdefault(k, []).append(v)
    pick: dict[str, Callable[[list[float]], float]] = {
        "max": max,
        "min": min,
        "mean": lambda vs: sum(vs) / len(vs),
    }
    return {k: pick[_kind(k)](vs) for k, vs in values.items()}


def _kind(key: str) -> str:
    """How a scalar combines across processes: ``max``, ``min`` or ``mean``."""
    name = key.rsplit("/", 1)[-1]
    if name.startswith("max"):
        return "max"
    if name.startswith("min") or name == "qk_clip":
        return "min"
    return "mean"


class _Reducer:
    """The scalars of every process combined: the largest of maxima, the smallest of minima
    and QK-Clip factors, the mean of the rest. All keys travel in one tensor per reduction
    (MAX, and SUM for the means), in an order the processes agreed on; a flag in the MAX
    tensor says that some process met a new key, and then they agree on the keys again."""

    def __init__(self) -> None:
        self.keys: list[str] | None = None

    def __call__(self, scalars: dict[str, float]) -> dict[str, float]:
        if self.keys is None:  # the first measured step, on every process alike
            self.keys = _agreed_keys(scalars)
        out = _reduce(self.keys, scalars, unseen=not scalars.keys() <= set(self.keys))
        if out is None:  # every process saw the flag: they all agree again, and reduce again
            self.keys = _agreed_keys(scalars, self.keys)
            out = _reduce(self.keys, scalars, unseen=False)
        assert out is not None  # no process has a key outside the union
        return out


def _agreed_keys(scalars: dict[str, float], known: list[str] | None = None) -> list[str]:
    """The union of every process's keys (and those known already), sorted."""
    gathered: list[list[str] | None] = [None] * _world()
    torch.distributed.all_gather_object(gathered, sorted(scalars))
    return sorted({*(known or []), *(k for keys in gathered for k in keys or [])})


def _reduce(keys: list[str], scalars: dict[str, float], *, unseen: bool) -> dict[str, float] | None:
    """One ``all_reduce(MAX)``, and one ``all_reduce(SUM)`` if any key is a mean; None, after
    the first, if some process flagged a key outside ``keys``."""
    dist = torch.distributed
    device = _device()
    kinds = [_kind(k) for k in keys]
    # MAX: maxima, negated minima (missing: -inf, which any sent value beats), and the flag
    peaks = [
        scalars.get(k, -math.inf) if kind == "max" else -scalars.get(k, math.inf)
        for k, kind in zip(keys, kinds, strict=True)
        if kind != "mean"
    ]
    packed = torch.tensor([*peaks, float(unseen)], dtype=torch.float64, device=device)
    dist.all_reduce(packed, op=dist.ReduceOp.MAX)
    if packed[-1].item() > 0:
        return None
    means = [k for k, kind in zip(keys, kinds, strict=True) if kind == "mean"]
    totals = None
    if means:  # SUM: the values, then how many processes sent each
        sent = [float(k in scalars) for k in means]
        values = [scalars.get(k, 0.0) for k in means]
        totals = torch.tensor([*values, *sent], dtype=torch.float64, device=device)
        dist.all_reduce(totals, op=dist.ReduceOp.SUM)
    return _unpacked(keys, kinds, packed.tolist(), totals)


def _unpacked(
    keys: list[str], kinds: list[str], peaks: list[float], totals: torch.Tensor | None
) -> dict[str, float]:
    out: dict[str, float] = {}
    peak = iter(peaks)
    means = [k for k, kind in zip(keys, kinds, strict=True) if kind == "mean"]
    sums = [] if totals is None else totals.tolist()
    mean_of = {k: (sums[i], sums[len(means) + i]) for i, k in enumerate(means)}
    for key, kind in zip(keys, kinds, strict=True):
        if kind == "mean":
            total, count = mean_of[key]
            if count:
                out[key] = total / count
            continue
        value = next(peak)
        if value > -math.inf:  # some process sent it
            out[key] = value if kind == "max" else -value
    return out


def _device() -> torch.device:
    """Where the collectives' tensors live: NCCL reduces CUDA tensors only."""
    if torch.distributed.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def _site_scalars(where: str, s: AttentionStats, tau: float) -> dict[str, float]:
    out = {f"attn/{where}/{name}": getattr(s, name) for name in LOGGED}
    if s.heads is not None:
        max_logit = [v for v in s.heads["max_logit"] if v is not None]
        entropy = [v for v in s.heads["entropy"] if v is not None]
        if max_logit:
            out[f"attn/{where}/max_logit"] = max(max_logit)
        if entropy:
            out[f"attn/{where}/min_head_entropy"] = min(entropy)
        for h, v in enumerate(s.heads["max_logit"]):
            if v is not None:
                out[f"attn/{where}/head{h}/max_logit"] = v
                # QK-Clip's factor for this head: min(1, tau / S_max), logged, never applied
                out[f"attn/{where}/head{h}/qk_clip"] = min(1.0, tau / v) if v > tau else 1.0
        for h, v in enumerate(s.heads["entropy"]):
            if v is not None:
                out[f"attn/{where}/head{h}/entropy"] = v  # mean H / log(keys) over the rows
    return {k: float(v) for k, v in out.items() if v is not None and math.isfinite(v)}
