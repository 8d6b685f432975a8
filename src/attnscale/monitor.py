r"""Attention monitor: watch every attention computation of a real PyTorch model.

Wrap a forward pass (or a few training steps) in an
[AttentionMonitor][attnscale.AttentionMonitor]; on exit,
[report][attnscale.AttentionMonitor.report] gives, per attention call site,
what was measured and what looks wrong, why it matters and how to fix it.

How calls are captured
----------------------
While the ``with`` block is active the monitor

- wraps ``torch.nn.functional.scaled_dot_product_attention``;
- wraps ``nn.MultiheadAttention.forward`` (every path: training, eval, with or
  without weights, and PyTorch's fused fast path). When the module runs SDPA
  (``need_weights=False``), its projected q, k and merged mask are read at that
  call; otherwise the statistics are recomputed from the module's own
  projection weights and the inputs;
- wraps ``nn.TransformerEncoderLayer.forward``: in eval mode PyTorch may run
  the whole layer as one fused kernel that never calls its attention module;
  the monitor then recomputes the attention statistics from the layer's input;
- wraps ``torch.softmax``, ``torch.nn.functional.softmax`` and
  ``Tensor.softmax`` and relates each softmax input to the most recent
  matrix product (``torch.matmul``, ``@``, ``Tensor.matmul``, ``torch.bmm``)
  of the same shape, to find hand-written attention $\mathrm{softmax}(c\,QK^\top)$.

Module paths come from global module hooks (``torch.nn.modules.module.
register_module_forward_pre_hook``), which, unlike per-module hooks, do not
switch PyTorch's fast paths off. Statistics are computed under
``torch.no_grad()`` on detached copies of a few batch elements, and the
model's own results are returned unchanged, so outputs and gradients are
bitwise identical with and without the monitor. The statistics run on one
CPU thread (the thread count is restored before the model continues): they
are small, and on a busy machine many small multi-threaded operations stall.
Code that bound
``scaled_dot_product_attention`` or ``softmax`` to a local name before the
``with`` block is not seen.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import inspect
import math
import numbers
from collections.abc import Callable, Iterator
from typing import Any, Literal

import torch
from torch import nn
from torch.nn import functional as F

from . import _checks

__all__ = [
    "GUIDE_URL",
    "THRESHOLDS",
    "AttentionMonitor",
    "AttentionRecord",
    "AttentionStats",
    "Finding",
    "MonitorReport",
]

#: Base URL of the debugging-checklist section of the guide; each finding's
#: message links to one page below it. Pages are built from
#: ``examples/05_debugging/plot_*.py`` (MkDocs directory URLs).
GUIDE_URL = "https://attnscale.github.io/attnscale/generated/gallery/05_debugging/"

_GUIDE_PAGES = {
    "scale-mismatch": "plot_01_scale_bugs/",
    "large-logits": "plot_02_soft_cap/",
    "entropy-collapse": "plot_04_entropy_collapse/",
    "non-finite": "plot_03_fp16_overflow/",
    "fp16-overflow-risk": "plot_03_fp16_overflow/",
    "no-attention": "plot_05_checklist/",
    "monitor-error": "plot_05_checklist/",
}

#: Default thresholds; any of them can be overridden as a keyword argument of
#: [AttentionMonitor][attnscale.AttentionMonitor].
THRESHOLDS: dict[str, float] = {
    # scale-mismatch: flag an effective scale this many times off 1/sqrt(head_dim)
    "scale_ratio": 1.5,
    # ... as a warning when a too-large scale gives a within-row logit std above this
    "max_logit_std": 2.0,
    # ... or a too-small scale gives a within-row logit std below this (near-uniform rows)
    "min_logit_std": 0.25,
    # large-logits: within-row logit std (warning; error at 4x)
    "large_logit_std": 5.0,
    # a row is saturated when its largest probability exceeds this
    "saturation": 0.99,
    # large-logits: fraction of saturated rows (warning; error at 5x)
    "saturated_fraction": 0.1,
    # entropy-collapse: a head's mean entropy / log(n) below this (warning; error at 1/4)
    "entropy_fraction": 0.2,
    # fp16-overflow-risk: warn when max |q.k| is within this factor of 65504
    "fp16_headroom": 8.0,
    # logits at or below this are treated as masked (-inf, -1e9, -1e4 style masks)
    "mask_value": -1e4,
}

_FP16_MAX = 65504.0
Severity = Literal["info", "warning", "error"]
_SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


@dataclasses.dataclass
class AttentionStats:
    r"""Statistics of one attention call (one step of a call site's time series).

    Logit statistics are taken over entries that are finite and not masked;
    ``logit_std`` is the within-row standard deviation (softmax ignores a
    shift of a row, so this is the spread that matters). Probabilities are
    recomputed in float32 from the logits. ``grad_norm`` is the L2 norm of the
    gradient of the loss with respect to the softmax input, over the sampled
    batch elements and query rows, filled during backward; see
    [AttentionMonitor][attnscale.AttentionMonitor] for when it stays None.
    """

    step: int
    path: str
    shape: tuple[int, ...]
    dtype: str
    head_dim: int | None
    n_heads: int | None
    scale: float | None
    scale_ratio: float | None
    scale_fit_residual: float | None
    q_std: float | None
    k_std: float | None
    max_abs_qk: float | None
    logit_mean: float
    logit_std: float
    max_abs_logit: float
    entropy: float
    entropy_fraction: float
    min_head_entropy_fraction: float
    max_prob: float
    saturated_fraction: float
    masked_fraction: float
    nonfinite_logits: int
    nonfinite_weights: int
    sampled_rows: int
    grad_norm: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return the statistics as a JSON-serialisable dict (non-finite floats become None)."""
        return {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}


@dataclasses.dataclass
class AttentionRecord:
    """One attention call site and its statistics, one entry per call (step).

    Attributes
    ----------
    where : str
        Module path (``layers.0.self_attn``) or class path of the caller, with
        ``#i`` appended for the i-th attention in one module call (i > 0).
    kind : str
        ``"sdpa"``, ``"multihead_attention"`` or ``"softmax(QK^T)"``.
    series : list of AttentionStats
        One entry per call, in order.
    """

    where: str
    kind: str
    series: list[AttentionStats] = dataclasses.field(default_factory=list)

    @property
    def last(self) -> AttentionStats:
        """Statistics of the most recent call."""
        return self.series[-1]

    def values(self, name: str) -> list[float | None]:
        """Return one statistic over the series, e.g. ``values("entropy")``.

        Raises
        ------
        ValueError
            If ``name`` is not a field of [AttentionStats][attnscale.AttentionStats].
        """
        fields = [f.name for f in dataclasses.fields(AttentionStats)]
        _checks.one_of(name, "name", fields)
        return [getattr(s, name) for s in self.series]

    def to_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-serialisable dict."""
        return {
            "where": self.where,
            "kind": self.kind,
            "series": [s.to_dict() for s in self.series],
        }


@dataclasses.dataclass
class Finding:
    """One diagnosis: what was measured, why it matters, how to fix it.

    Attributes
    ----------
    code : str
        ``scale-mismatch``, ``large-logits``, ``entropy-collapse``,
        ``non-finite``, ``fp16-overflow-risk``, ``no-attention`` or
        ``monitor-error``.
    severity : str
        ``"info"``, ``"warning"`` or ``"error"``.
    where : str
        The call site, as in [AttentionRecord][attnscale.AttentionRecord].
    message : str
        Measurement, consequence, fix and a link to the guide.
    """

    code: str
    severity: Severity
    where: str
    message: str

    def to_dict(self) -> dict[str, str]:
        """Return the finding as a dict of strings."""
        return dataclasses.asdict(self)


@dataclasses.dataclass
class MonitorReport:
    """What an [AttentionMonitor][attnscale.AttentionMonitor] saw.

    Attributes
    ----------
    records : list of AttentionRecord
        One per call site, in order of first call.
    findings : list of Finding
        Sorted by severity (errors first).
    """

    records: list[AttentionRecord]
    findings: list[Finding]

    def by_severity(self, severity: str) -> list[Finding]:
        """Return the findings of one severity.

        Raises
        ------
        ValueError
            If ``severity`` is not ``"info"``, ``"warning"`` or ``"error"``.
        """
        _checks.one_of(severity, "severity", _SEVERITY_RANK)
        return [f for f in self.findings if f.severity == severity]

    def codes(self, min_severity: str = "warning") -> set[str]:
        """Return the finding codes at ``min_severity`` or worse.

        Raises
        ------
        ValueError
            If ``min_severity`` is not a severity name.
        """
        _checks.one_of(min_severity, "min_severity", _SEVERITY_RANK)
        rank = _SEVERITY_RANK[min_severity]
        return {f.code for f in self.findings if _SEVERITY_RANK[f.severity] >= rank}

    def record(self, where: str) -> AttentionRecord:
        """Return the record of one call site.

        Raises
        ------
        KeyError
            If no call site is called ``where``.
        """
        for r in self.records:
            if r.where == where:
                return r
        raise KeyError(
            f"no attention call site {where!r}; known: {[r.where for r in self.records]}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-serialisable dict with ``records`` and ``findings``."""
        return {
            "records": [r.to_dict() for r in self.records],
            "findings": [f.to_dict() for f in self.findings],
        }

    def __str__(self) -> str:
        if not self.records:
            lines = ["AttentionMonitor: no attention computation was captured."]
        else:
            head = (
                f"{'where':<28} {'kind':<19} {'calls':>5} {'d_h':>4} {'scale/ref':>9} "
                f"{'logit sd':>8} {'max|l|':>8} {'H/logn':>6} {'max p':>6} {'sat':>5} "
                f"{'nonfin':>6} dtype"
            )
            lines = [head, "-" * len(head)]
            for r in self.records:
                s = r.last
                lines.append(
                    f"{_clip(r.where, 28):<28} {r.kind:<19} {len(r.series):>5} "
                    f"{_fmt(s.head_dim, 'd'):>4} {_fmt(s.scale_ratio, '.3g'):>9} "
                    f"{s.logit_std:>8.3g} {s.max_abs_logit:>8.3g} {s.entropy_fraction:>6.3f} "
                    f"{s.max_prob:>6.3f} {s.saturated_fraction:>5.2f} "
                    f"{s.nonfinite_logits + s.nonfinite_weights:>6d} {s.dtype}"
                )
            lines.append(
                "(statistics of each site's last call; scale/ref = effective scale "
                "x sqrt(head_dim))"
            )
        lines.append("")
        if not self.findings:
            lines.append("No findings.")
        for f in self.findings:
            lines.append(f"[{f.severity.upper()}] {f.code} at {f.where}:")
            lines.append(f"    {f.message}")
        return "\n".join(lines)


def _clip(s: str, n: int) -> str:
    return s if len(s) <= n else "…" + s[-(n - 1) :]


def _fmt(v: float | int | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


def _jsonable(v: object) -> object:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, tuple):
        return list(v)
    return v


# ---------------------------------------------------------------------------
# statistics
# ---------------------------------------------------------------------------


@torch.no_grad()
def _logit_stats(
    logits: torch.Tensor, *, mask_value: float, saturation: float, weights: torch.Tensor | None
) -> dict[str, float | int]:
    """Statistics of attention logits of shape (..., q_len, k_len)."""
    x = logits.detach().float()
    # every entry is exactly one of: valid, masked (<= mask_value, -inf included), NaN or +inf
    valid = (x > mask_value) & (x != math.inf)
    n_masked = (x <= mask_value).sum()
    count = valid.sum(-1, keepdim=True)  # (..., q_len, 1)
    zero = torch.zeros((), dtype=x.dtype, device=x.device)
    x0 = torch.where(valid, x, zero)
    total = count.sum()
    row_mean = x0.sum(-1, keepdim=True) / count.clamp_min(1)  # (..., q_len, 1)
    centred = torch.where(valid, x - row_mean, zero)
    logp = torch.log_softmax(torch.where(valid, x, -math.inf), dim=-1)  # NaN in empty rows
    p = logp.exp()
    ent = -torch.where(valid, p * logp, zero).sum(-1)  # (..., q_len)
    live = count.squeeze(-1) > 0  # (..., q_len)
    n = count.squeeze(-1).float()
    frac = torch.where(n > 1, ent / torch.log(n.clamp_min(2)), torch.ones_like(ent))
    frac = torch.where(live, frac, zero)
    pmax = torch.where(live, p.max(-1).values, zero)  # (..., q_len)
    n_live = live.sum().clamp_min(1)
    if x.dim() >= 3:
        # mean entropy fraction per head: heads are the third-to-last axis
        axes = tuple(i for i in range(frac.dim()) if i != frac.dim() - 2)
        per_head = frac.sum(dim=axes) / live.sum(dim=axes).clamp_min(1)
        min_head = per_head.min()
    else:
        min_head = frac.sum() / n_live
    # one transfer for all scalars (one device sync on GPU)
    scalars = torch.stack(
        [
            total.to(x.dtype),
            x0.sum(),
            (centred * centred).sum(),
            x0.abs().max() if x.numel() else zero,
            torch.where(live, ent, zero).sum() / n_live,
            frac.sum() / n_live,
            min_head,
            pmax.sum() / n_live,
            ((pmax > saturation) & live).sum() / n_live,
            n_masked.to(x.dtype),
            valid.sum().to(x.dtype),
        ]
    ).tolist()
    tot, xsum, sq, max_abs, entropy, ent_frac, min_head_f, max_prob, sat, masked, n_valid = scalars
    nonfinite = x.numel() - int(n_valid) - int(masked)
    if tot > 0:
        logit_mean, logit_std = xsum / tot, math.sqrt(sq / tot)
    else:
        logit_mean = logit_std = max_abs = math.nan
    nonfinite_w = 0
    if weights is not None:
        nonfinite_w = int((~torch.isfinite(weights.detach())).sum())
    elif nonfinite:
        nonfinite_w = int(torch.isnan(torch.softmax(x, dim=-1)).sum())
    return {
        "logit_mean": logit_mean,
        "logit_std": logit_std,
        "max_abs_logit": max_abs,
        "entropy": entropy,
        "entropy_fraction": ent_frac,
        "min_head_entropy_fraction": min_head_f,
        "max_prob": max_prob,
        "saturated_fraction": sat,
        "masked_fraction": masked / max(x.numel(), 1),
        "nonfinite_logits": nonfinite,
        "nonfinite_weights": nonfinite_w,
        "sampled_rows": int(live.numel()),
    }


def _std(t: torch.Tensor | None) -> float | None:
    if t is None or t.numel() < 2:
        return None
    return float(t.detach().float().std())


# ---------------------------------------------------------------------------
# the monitor
# ---------------------------------------------------------------------------


def _sdpa_signature(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> None:
    """Signature of ``F.scaled_dot_product_attention``, used to bind its arguments."""


_SDPA_SIG = inspect.signature(_sdpa_signature)


class AttentionMonitor:
    r"""Context manager that records attention statistics and diagnoses scaling bugs.

    Inside ``with AttentionMonitor(model) as monitor:`` every attention
    computation is measured (see the module docs for what is captured). The
    effective scale $c$ of $\mathrm{softmax}(c\,q\cdot k)$ is compared with
    $1/\sqrt{d_h}$; for hand-written attention, $c$ is the least-squares
    factor between the softmax input and the $QK^\top$ product of the same
    shape, times any factor applied to $q$ or $k$ after their ``nn.Linear``
    projections, and $d_h$ is that product's inner dimension.

    Severity follows the measured effect: a scale that is off but whose logits
    stay in a healthy range (for example T5, which folds the scale into its
    initialisation) is reported as ``info``, not as a warning.

    Parameters
    ----------
    model : torch.nn.Module, optional
        With a model, call sites are named by module path
        (``layers.0.self_attn``); without, by class names.
    gradients : bool
        Record the gradient norm at the softmax input during backward, over
        the sampled rows. Hand-written attention and ``nn.MultiheadAttention``
        with ``need_weights=True``: read from the softmax input itself, which
        is in the autograd graph. SDPA (also inside ``nn.MultiheadAttention``
        with ``need_weights=False``): the logits never exist in the graph, so a
        hook on the attention output reads $dO$ and the monitor applies the
        softmax backward, $dS = P \odot (dP - \mathrm{rowsum}(dP \odot P))$
        with $dP = dO\,V^\top$ and $P$ recomputed from the sampled $q$, $k$
        and mask; this is exact for ``dropout_p == 0``. It stays None when
        SDPA applies dropout (the mask is unknown; this includes
        ``nn.TransformerEncoderLayer`` in training with its default dropout), for
        the fused fast paths (they run without gradients) and when no backward
        pass runs inside the block. The hooks only read gradients, so backward
        is unchanged.
    sample_batch : int
        Statistics use at most this many elements of the leading (batch) axis,
        which keeps the overhead low.
    max_query_rows : int
        ... and at most this many query rows (an evenly strided subset).
    **thresholds : float
        Overrides of [THRESHOLDS][attnscale.THRESHOLDS], e.g. ``scale_ratio=2``.

    Raises
    ------
    TypeError
        If ``model`` is not an ``nn.Module`` or a threshold is not a number.
    ValueError
        If a threshold name is unknown or its value is out of range.

    Examples
    --------
    >>> import torch
    >>> from attnscale import AttentionMonitor
    >>> layer = torch.nn.TransformerEncoderLayer(64, 4, batch_first=True)
    >>> with AttentionMonitor(layer) as monitor:
    ...     _ = layer(torch.randn(2, 10, 64))
    >>> report = monitor.report()
    >>> len(report.records), report.records[0].last.head_dim
    (1, 16)
    """

    def __init__(
        self,
        model: nn.Module | None = None,
        *,
        gradients: bool = True,
        sample_batch: int = 2,
        max_query_rows: int = 64,
        **thresholds: float,
    ) -> None:
        if model is not None and not isinstance(model, nn.Module):
            raise TypeError(f"model must be a torch.nn.Module or None, got {type(model).__name__}")
        if not isinstance(gradients, bool):
            raise TypeError(f"gradients must be a bool, got {type(gradients).__name__}")
        self.model = model
        self.gradients = gradients
        self.sample_batch = _checks.positive_int(sample_batch, "sample_batch")
        self.max_query_rows = _checks.positive_int(max_query_rows, "max_query_rows")
        self.thresholds = dict(THRESHOLDS)
        for name, given in thresholds.items():
            value: object = given
            if name not in THRESHOLDS:
                raise ValueError(
                    f"unknown threshold {name!r}; expected one of {', '.join(sorted(THRESHOLDS))}"
                )
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                raise TypeError(
                    f"threshold {name} must be a real number, got {type(value).__name__}"
                )
            if name == "mask_value":
                self.thresholds[name] = _checks.finite_float(value, name)
            elif name in ("saturation", "saturated_fraction", "entropy_fraction"):
                self.thresholds[name] = _checks.probability(value, name, open_interval=True)
            elif name in ("scale_ratio", "fp16_headroom"):
                v = _checks.positive_float(value, name)
                if v < 1:
                    raise ValueError(f"{name} must be >= 1, got {v!r}")
                self.thresholds[name] = v
            else:
                self.thresholds[name] = _checks.positive_float(value, name)
        self._records: dict[tuple[str, str], AttentionRecord] = {}
        self._errors: list[tuple[str, str]] = []
        self._names: dict[int, str] = {}
        self._stack: list[nn.Module] = []
        self._ordinals: collections.Counter[tuple[str, str]] = collections.Counter()
        self._products: collections.deque[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = (
            collections.deque(maxlen=4)
        )
        self._linear_outputs: collections.deque[torch.Tensor] = collections.deque(maxlen=6)
        self._mha_calls: collections.Counter[int] = collections.Counter()
        self._mha_inner: list[tuple[str, Any]] | None = None
        self._suppress = 0
        self._active = False
        self._restore: list[Callable[[], None]] = []

    # -- context manager -------------------------------------------------

    def __enter__(self) -> AttentionMonitor:
        if self._active:
            raise RuntimeError("this AttentionMonitor is already active")
        if self.model is not None:
            self._names = {id(m): n for n, m in self.model.named_modules()}
        try:
            self._install()
        except BaseException:
            self._uninstall()
            raise
        self._active = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._active = False
        self._uninstall()

    def _patch(self, owner: object, name: str, wrapper_factory: Callable[[Any], Any]) -> None:
        original = getattr(owner, name)
        setattr(owner, name, wrapper_factory(original))
        self._restore.append(lambda: setattr(owner, name, original))

    def _install(self) -> None:
        from torch.nn.modules import module as module_mod

        h1 = module_mod.register_module_forward_pre_hook(self._pre_hook)
        h2 = module_mod.register_module_forward_hook(self._post_hook, always_call=True)
        self._restore.append(h1.remove)
        self._restore.append(h2.remove)
        self._patch(F, "scaled_dot_product_attention", self._wrap_sdpa)
        for module_obj in (F, torch):
            self._patch(module_obj, "softmax", self._wrap_softmax)
        self._patch(torch.Tensor, "softmax", self._wrap_softmax)
        for owner, name in (
            (torch, "matmul"),
            (torch, "bmm"),
            (torch.Tensor, "matmul"),
            (torch.Tensor, "__matmul__"),
            (torch.Tensor, "bmm"),
        ):
            self._patch(owner, name, self._wrap_matmul)
        self._patch(nn.MultiheadAttention, "forward", self._wrap_mha)
        self._patch(nn.TransformerEncoderLayer, "forward", self._wrap_encoder_layer)

    def _uninstall(self) -> None:
        while self._restore:
            undo = self._restore.pop()
            with contextlib.suppress(Exception):
                undo()
        self._stack.clear()
        self._products.clear()
        self._linear_outputs.clear()
        self._mha_inner = None
        self._suppress = 0

    @contextlib.contextmanager
    def _quiet(self) -> Iterator[None]:
        self._suppress += 1
        try:
            yield
        finally:
            self._suppress -= 1

    def _watching(self) -> bool:
        return self._active and self._suppress == 0

    # -- module bookkeeping ---------------------------------------------

    def _name(self, module: nn.Module) -> str:
        name = self._names.get(id(module))
        if name is not None:
            return name or type(module).__name__
        return type(module).__name__

    def _where(self) -> str:
        if not self._stack:
            return "<top level>"
        if self._names:
            for m in reversed(self._stack):
                if id(m) in self._names:
                    return self._name(m)
        return ".".join(type(m).__name__ for m in self._stack)

    def _pre_hook(self, module: nn.Module, args: object) -> None:
        if not self._active:
            return
        if not self._stack:
            self._ordinals.clear()
        self._stack.append(module)

    def _post_hook(self, module: nn.Module, args: object, output: object) -> None:
        if not self._active:
            return
        if self._stack and self._stack[-1] is module:
            self._stack.pop()
        elif module in self._stack:  # unwinding after an exception
            while self._stack and self._stack.pop() is not module:
                pass
        if (
            isinstance(module, nn.Linear)
            and self._suppress == 0
            and isinstance(output, torch.Tensor)
            and output.is_floating_point()
        ):
            self._linear_outputs.append(output.detach())

    # -- recording -------------------------------------------------------

    def _site(self, kind: str, where: str | None = None) -> AttentionRecord:
        where = self._where() if where is None else where
        ordinal = 0
        if self._stack:  # calls outside any module all belong to one site per kind
            ordinal = self._ordinals[(where, kind)]
            self._ordinals[(where, kind)] += 1
        key = (where if ordinal == 0 else f"{where}#{ordinal}", kind)
        if key not in self._records:
            self._records[key] = AttentionRecord(where=key[0], kind=kind)
        return self._records[key]

    @staticmethod
    @contextlib.contextmanager
    def _one_thread() -> Iterator[None]:
        # The statistics are many small operations on a sampled tensor. With several
        # intra-op threads each one is a parallel region, and on a busy machine every
        # region can stall for a scheduler time slice (measured: ~0.4 s per call with
        # 2 threads against ~0.02 s with 1). So they run on one thread; the count is
        # restored before the model continues, and the model's own ops are untouched.
        threads = torch.get_num_threads()
        try:
            if threads > 1:
                torch.set_num_threads(1)
            yield
        finally:
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)

    def _safely(self, kind: str, where: str | None, fn: Callable[[], None]) -> None:
        try:
            with self._one_thread(), self._quiet(), torch.no_grad():
                fn()
        except Exception as err:  # never break the model: report instead
            self._errors.append((where or self._where(), f"{kind}: {type(err).__name__}: {err}"))

    def _watch_gradient(
        self,
        tensor: torch.Tensor,
        stats: AttentionStats,
        where: str,
        grad_at_softmax_input: Callable[[torch.Tensor], torch.Tensor],
    ) -> None:
        """Fill ``stats.grad_norm`` during backward from the gradient reaching ``tensor``.

        ``tensor`` must be in the autograd graph. The hook only reads the gradient
        and returns None, so backward propagates exactly the same values.
        """
        if not (self.gradients and tensor.requires_grad):
            return

        def hook(grad: torch.Tensor) -> None:
            try:
                with self._one_thread(), self._quiet(), torch.no_grad():
                    g = grad_at_softmax_input(grad.detach())
                    stats.grad_norm = float(g.float().norm())
            except Exception as err:  # never break backward: report instead
                self._errors.append((where, f"gradient: {type(err).__name__}: {err}"))

        tensor.register_hook(hook)  # type: ignore[no-untyped-call]

    def _sample(self, t: torch.Tensor, rows_dim: int | None = None) -> torch.Tensor:
        """Keep the first ``sample_batch`` batch elements and a strided subset of rows."""
        t = t.detach()
        if t.dim() >= 3 and t.shape[0] > self.sample_batch:
            t = t[: self.sample_batch]
        if rows_dim is not None:
            n = t.shape[rows_dim]
            if n > self.max_query_rows:
                t = t.index_select(rows_dim, self._row_index(n).to(t.device))
        return t

    def _prescale(self, operand: torch.Tensor) -> float:
        """Factor by which ``operand`` is a rescaled copy of a recent nn.Linear output (else 1)."""
        a = operand.detach()
        best, best_err = 1.0, 1e-3
        norms_a: tuple[float, float, float] | None = None
        for out in self._linear_outputs:
            if out.numel() != a.numel() or out.numel() == 0:
                continue
            if out.data_ptr() == a.data_ptr():
                return 1.0
            if norms_a is None:
                af = a.float()
                norms_a = (float(af.norm(2)), float(af.norm(1)), float(af.abs().max()))
            of = out.float()
            norms_o = (float(of.norm(2)), float(of.norm(1)), float(of.abs().max()))
            if min(norms_o) <= 0 or min(norms_a) <= 0:
                continue
            ratios = [x / y for x, y in zip(norms_a, norms_o, strict=True)]
            err = (max(ratios) - min(ratios)) / ratios[0]
            if err < best_err:
                best, best_err = ratios[0], err
        return best

    def _add(
        self,
        site: tuple[str, str | None],
        *,
        path: str,
        logits: torch.Tensor,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        head_dim: int | None,
        n_heads: int | None,
        scale: float | None,
        q: torch.Tensor | None,
        k: torch.Tensor | None,
        weights: torch.Tensor | None = None,
        fit_residual: float | None = None,
        max_abs_qk: float | None = None,
    ) -> AttentionStats:
        th = self.thresholds
        stats = _logit_stats(
            logits, mask_value=th["mask_value"], saturation=th["saturation"], weights=weights
        )
        record = self._site(*site)
        ratio = None if scale is None or head_dim is None else scale * math.sqrt(head_dim)
        if max_abs_qk is None and scale not in (None, 0.0):
            max_abs_qk = float(stats["max_abs_logit"]) / abs(scale)
        s = AttentionStats(
            step=len(record.series),
            path=path,
            shape=shape,
            dtype=str(dtype).replace("torch.", ""),
            head_dim=head_dim,
            n_heads=n_heads,
            scale=scale,
            scale_ratio=ratio,
            scale_fit_residual=fit_residual,
            q_std=_std(q),
            k_std=_std(k),
            max_abs_qk=max_abs_qk,
            **stats,  # type: ignore[arg-type]
        )
        record.series.append(s)
        return s

    # -- scaled_dot_product_attention -----------------------------------

    def _wrap_sdpa(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def sdpa(*args: Any, **kwargs: Any) -> Any:
            out = original(*args, **kwargs)
            if self._watching():
                self._safely("sdpa", None, lambda: self._on_sdpa(args, kwargs, out))
            elif self._active and self._mha_inner is not None:
                # inside nn.MultiheadAttention: keep the projected q, k and the merged mask
                # it passes here, so that its statistics need no second projection
                self._mha_inner.append(("sdpa", (args, kwargs, out)))
            return out

        return sdpa

    def _on_sdpa(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: object,
        site: tuple[str, str | None] = ("sdpa", None),
        path: str = "sdpa",
    ) -> None:
        b = _SDPA_SIG.bind(*args, **kwargs).arguments
        q, k = b["query"], b["key"]
        mask, causal, scale = b.get("attn_mask"), b.get("is_causal", False), b.get("scale")
        head_dim = int(q.shape[-1])
        c = 1 / math.sqrt(head_dim) if scale is None else float(scale)
        # inside nn.MultiheadAttention q and k come straight from its in-projection
        pre = 1.0 if site[0] != "sdpa" else self._prescale(q) * self._prescale(k)
        lq, lk = q.shape[-2], k.shape[-2]
        qs, ks = self._sample(q, rows_dim=q.dim() - 2), self._sample(k)
        if ks.dim() >= 3 and qs.dim() >= 3 and ks.shape[-3] != qs.shape[-3]:  # GQA
            ks = ks.repeat_interleave(qs.shape[-3] // ks.shape[-3], dim=-3)
        logits = (qs.float() @ ks.float().transpose(-2, -1)) * c  # (..., rows, k_len)
        rows = self._row_index(lq).to(logits.device)
        if causal:
            allowed = torch.ones(lq, lk, dtype=torch.bool, device=logits.device)
            allowed = allowed.tril(diagonal=lk - lq)[rows]
            logits = logits.masked_fill(~allowed, -math.inf)
        if mask is not None:
            full = torch.broadcast_to(mask, (*q.shape[:-2], lq, lk))  # (..., q_len, k_len)
            full = self._sample(full)[..., rows, :]
            logits = (
                logits.masked_fill(~full, -math.inf)
                if full.dtype == torch.bool
                else logits + full.float()
            )
        n_heads = int(q.shape[-3]) if q.dim() >= 4 else None
        stats = self._add(
            site,
            path=path,
            logits=logits,
            shape=tuple(q.shape),
            dtype=q.dtype,
            head_dim=head_dim,
            n_heads=n_heads,
            scale=c * pre,
            q=qs,
            k=ks,
            max_abs_qk=self._max_abs_qk(qs, ks, q.dtype),
        )
        if isinstance(out, torch.Tensor) and float(b.get("dropout_p", 0.0)) == 0.0:
            # The logits never exist in the graph, but the gradient dO reaching the
            # output does. With P = softmax(S) and O = P V, backward gives
            # dP = dO V^T and dS = P * (dP - rowsum(dP * P)), exact on the sampled rows.
            # With dropout on P the mask is unknown, so no gradient is recorded.
            vs = self._sample(b["value"])
            if vs.dim() >= 3 and qs.dim() >= 3 and vs.shape[-3] != qs.shape[-3]:  # GQA
                vs = vs.repeat_interleave(qs.shape[-3] // vs.shape[-3], dim=-3)

            def grad_at_logits(grad_out: torch.Tensor) -> torch.Tensor:
                g = self._sample(grad_out, rows_dim=grad_out.dim() - 2).float()  # (.., rows, dv)
                p = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # (..., rows, k_len)
                dp = g @ vs.float().transpose(-2, -1)  # (..., rows, k_len)
                return p * (dp - (dp * p).sum(-1, keepdim=True))

            self._watch_gradient(out, stats, site[1] or self._where(), grad_at_logits)

    def _row_index(self, n: int) -> torch.Tensor:
        step = math.ceil(n / self.max_query_rows) if n > self.max_query_rows else 1
        return torch.arange(0, n, step)

    @staticmethod
    def _max_abs_qk(q: torch.Tensor, k: torch.Tensor, dtype: torch.dtype) -> float | None:
        if dtype != torch.float16:
            return None
        return float((q.float() @ k.float().transpose(-2, -1)).abs().max())

    # -- nn.MultiheadAttention ------------------------------------------

    def _wrap_mha(self, original: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(original)

        @functools.wraps(original)
        def forward(module: nn.MultiheadAttention, *args: Any, **kwargs: Any) -> Any:
            if not self._watching():
                return original(module, *args, **kwargs)
            self._mha_calls[id(module)] += 1
            outer, self._mha_inner = self._mha_inner, []
            try:
                with self._quiet():
                    out = original(module, *args, **kwargs)
                inner = self._mha_inner
            finally:
                self._mha_inner = outer
            where = self._name(module) if self._names else self._where()
            sdpa_calls = [v for kind, v in inner if kind == "sdpa"]
            if len(sdpa_calls) == 1:  # its SDPA path (need_weights=False, not the fast path)
                sdpa_args, sdpa_kwargs, sdpa_out = sdpa_calls[0]
                self._safely(
                    "multihead_attention",
                    where,
                    lambda: self._on_sdpa(
                        sdpa_args,
                        sdpa_kwargs,
                        sdpa_out,
                        site=("multihead_attention", where),
                        path="multihead_attention",
                    ),
                )
                return out
            got: list[AttentionStats] = []
            self._safely(
                "multihead_attention",
                where,
                lambda: got.append(
                    self._on_mha(
                        module,
                        sig.bind(module, *args, **kwargs).arguments,
                        where,
                        "multihead_attention",
                    )
                ),
            )
            # F.softmax calls Tensor.softmax: both wrappers see the same tensor
            softmax_inputs = list({id(v): v for kind, v in inner if kind == "softmax"}.values())
            if got and len(softmax_inputs) == 1:  # need_weights=True: the scores are in the graph
                x = softmax_inputs[0]
                _, h, lq, _ = got[0].shape

                def grad_at_scores(g: torch.Tensor) -> torch.Tensor:
                    g = g.reshape(-1, h, lq, g.shape[-1])  # (batch, heads, q_len, k_len)
                    return self._sample(g, rows_dim=2)

                self._watch_gradient(x, got[0], where, grad_at_scores)
            return out

        return forward

    def _on_mha(
        self,
        m: nn.MultiheadAttention,
        a: dict[str, Any],
        where: str,
        path: str,
        *,
        normed: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> AttentionStats:
        query, key = a["query"], a["key"]
        attn_mask, kpm = a.get("attn_mask"), a.get("key_padding_mask")
        is_causal = a.get("is_causal", False)
        lengths: list[int] | None = None
        if query.is_nested:
            lengths = [int(t.shape[0]) for t in query.unbind()]
            query = query.to_padded_tensor(0.0)
            key = query if a["key"] is a["query"] else key.to_padded_tensor(0.0)
        if normed is not None:
            query = key = normed(query)
        batched = query.dim() == 3
        if not batched:  # (L, E) -> (L, 1, E)
            query, key = query.unsqueeze(1), key.unsqueeze(1)
            if kpm is not None:
                kpm = kpm.unsqueeze(0)
        elif m.batch_first or normed is not None or lengths is not None:  # (B, L, E) -> (L, B, E)
            query, key = query.transpose(0, 1), key.transpose(0, 1)
        lq, bsz, e = query.shape
        nb = min(bsz, self.sample_batch)
        query, key = query[:, :nb], key[:, :nb]  # (L, nb, E)
        h = m.num_heads
        d = e // h
        if m._qkv_same_embed_dim:
            wq, wk, _ = m.in_proj_weight.chunk(3)
        else:
            wq, wk = m.q_proj_weight, m.k_proj_weight
        bq = bk = None
        if m.in_proj_bias is not None:
            bq, bk, _ = m.in_proj_bias.chunk(3)
        rows = self._row_index(lq).to(query.device)
        # project only the sampled query rows
        q = F.linear(query[rows].float(), wq.float(), None if bq is None else bq.float())
        k = F.linear(key.float(), wk.float(), None if bk is None else bk.float())
        if m.bias_k is not None:
            k = torch.cat([k, m.bias_k.float().expand(1, nb, e)])
        if m.add_zero_attn:
            k = torch.cat([k, k.new_zeros(1, nb, e)])
        lk = k.shape[0]
        q = q.reshape(len(rows), nb, h, d).permute(1, 2, 0, 3)  # (nb, heads, rows, d)
        k = k.reshape(lk, nb, h, d).permute(1, 2, 0, 3)  # (nb, heads, k_len, d)
        c = 1 / math.sqrt(d)
        logits = (q @ k.transpose(-2, -1)) * c  # (nb, heads, rows, k_len)
        if attn_mask is None and is_causal:
            allowed = torch.ones(lq, lk, dtype=torch.bool, device=logits.device).tril()[rows]
            logits = logits.masked_fill(~allowed, -math.inf)
        if attn_mask is not None:
            am = attn_mask
            if am.dim() == 3:  # (batch * heads, L, S) -> (batch, heads, L, S)
                am = am.reshape(bsz, h, *am.shape[-2:])[:nb]
            am = am[..., rows, :]
            pad = lk - am.shape[-1]
            if pad:
                am = F.pad(am, (0, pad), value=False if am.dtype == torch.bool else 0.0)
            logits = (
                logits.masked_fill(am, -math.inf) if am.dtype == torch.bool else logits + am.float()
            )
        if kpm is not None:
            kp = kpm[:nb, None, None, :]  # (nb, 1, 1, S)
            pad = lk - kp.shape[-1]
            if pad:
                kp = F.pad(kp, (0, pad), value=False if kp.dtype == torch.bool else 0.0)
            logits = (
                logits.masked_fill(kp, -math.inf) if kp.dtype == torch.bool else logits + kp.float()
            )
        if lengths is not None:
            dev = logits.device
            lens = torch.tensor(lengths[:nb], device=dev)[:, None]  # (nb, 1)
            keep = torch.arange(lk, device=dev)[None, :] < lens  # (nb, S)
            logits = logits.masked_fill(~keep[:, None, None, :], -math.inf)
            q_keep = rows[None, :] < lens  # (nb, rows)
            logits = logits.masked_fill(~q_keep[:, None, :, None], -math.inf)
        dtype = a["query"].dtype
        return self._add(
            (path.split(":")[0], where),
            path=path,
            logits=logits,
            shape=(bsz, h, lq, d),
            dtype=dtype,
            head_dim=d,
            n_heads=h,
            scale=c,
            q=q,
            k=k,
            max_abs_qk=float((q @ k.transpose(-2, -1)).abs().max())
            if dtype == torch.float16
            else None,
        )

    # -- nn.TransformerEncoderLayer (fused fast path) -------------------

    def _wrap_encoder_layer(self, original: Callable[..., Any]) -> Callable[..., Any]:
        sig = inspect.signature(original)

        @functools.wraps(original)
        def forward(layer: nn.TransformerEncoderLayer, *args: Any, **kwargs: Any) -> Any:
            if not self._watching():
                return original(layer, *args, **kwargs)
            before = self._mha_calls[id(layer.self_attn)]
            out = original(layer, *args, **kwargs)
            if self._mha_calls[id(layer.self_attn)] == before and self._watching():
                m = layer.self_attn
                where = self._name(m) if self._names else self._where() + ".self_attn"

                def run() -> None:
                    a = sig.bind(layer, *args, **kwargs).arguments
                    src = a["src"]
                    mask = a.get("src_mask")
                    if mask is None and a.get("is_causal", False):
                        n = src.shape[-2]
                        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
                    args_mha = {
                        "query": src,
                        "key": src,
                        "attn_mask": mask,
                        "key_padding_mask": a.get("src_key_padding_mask"),
                        "is_causal": False,
                    }
                    norm = layer.norm1
                    normed = (
                        (
                            lambda t: F.layer_norm(
                                t, norm.normalized_shape, norm.weight, norm.bias, norm.eps
                            )
                        )
                        if layer.norm_first
                        else (lambda t: t)
                    )
                    self._on_mha(
                        m, args_mha, where, "multihead_attention:encoder-fastpath", normed=normed
                    )

                self._safely("multihead_attention", where, run)
            return out

        return forward

    # -- hand-written attention: matmul + softmax -----------------------

    def _wrap_matmul(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def matmul(a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(a, b, *args, **kwargs)
            if (
                self._active
                and self._suppress == 0
                and isinstance(out, torch.Tensor)
                and out.dim() >= 2
                and out.is_floating_point()
                and isinstance(a, torch.Tensor)
                and isinstance(b, torch.Tensor)
                and a.dim() >= 2
                and b.dim() >= 2
                and not isinstance(a, nn.Parameter)
                and not isinstance(b, nn.Parameter)
            ):
                self._products.append((out.detach(), a.detach(), b.detach()))
            return out

        return matmul

    def _wrap_softmax(self, original: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(original)
        def softmax(x: Any, *args: Any, **kwargs: Any) -> Any:
            if not self._watching():
                out = original(x, *args, **kwargs)
            else:
                with self._quiet():  # F.softmax calls Tensor.softmax: record the call once
                    out = original(x, *args, **kwargs)
            if self._watching() and isinstance(x, torch.Tensor) and x.dim() >= 2:
                dim = kwargs.get("dim", args[0] if args else None)
                if dim in (-1, x.dim() - 1) and x.is_floating_point():
                    self._safely("softmax(QK^T)", None, lambda: self._on_softmax(x, out))
            elif self._active and self._mha_inner is not None and isinstance(x, torch.Tensor):
                self._mha_inner.append(("softmax", x))  # the scores inside nn.MultiheadAttention
            return out

        return softmax

    def _on_softmax(self, x: torch.Tensor, out: torch.Tensor) -> None:
        match = None
        for prod, a, b in reversed(self._products):
            if prod.shape == x.shape:
                match = (prod, a, b)
                break
        if match is None:
            return  # a softmax that is not attention (e.g. classification)
        prod, a, b = match
        xs = self._sample(x, rows_dim=x.dim() - 2).float()
        ps = self._sample(prod, rows_dim=prod.dim() - 2).float()
        if x.data_ptr() == prod.data_ptr() and x.stride() == prod.stride():
            c, resid = 1.0, 0.0  # type: float | None, float | None
        else:
            ok = torch.isfinite(xs) & torch.isfinite(ps) & (xs > self.thresholds["mask_value"])
            xv, pv = xs[ok], ps[ok]
            den = float((pv * pv).sum())
            if den > 0.0:
                c = float((xv * pv).sum()) / den
                nx = float(xv.norm())
                resid = float((xv - c * pv).norm()) / nx if nx > 0 else 0.0
            elif bool(torch.isfinite(ps).all()):
                return  # nothing to compare, nothing overflowed: not attention we can read
            else:  # every entry overflowed or is masked: keep the record, scale unknown
                c, resid = None, None
        if resid is not None and resid >= 0.1:
            c = None  # not a pure rescaling (soft-cap, additive bias): scale unknown
        head_dim = int(a.shape[-1])
        pre = self._prescale(a) * self._prescale(b)
        n_heads = int(x.shape[-3]) if x.dim() >= 4 else None
        finite = ps[torch.isfinite(ps)]
        stats = self._add(
            ("softmax(QK^T)", None),
            path="softmax",
            logits=xs,
            shape=tuple(x.shape),
            dtype=x.dtype,
            head_dim=head_dim,
            n_heads=n_heads,
            scale=None if c is None else c * pre,
            q=self._sample(a),
            k=self._sample(b),
            weights=self._sample(out, rows_dim=out.dim() - 2),
            fit_residual=resid,
            max_abs_qk=(float(finite.abs().max()) if finite.numel() else math.inf)
            if prod.dtype == torch.float16
            else None,
        )
        if prod.dtype == torch.float16 and not bool(torch.isfinite(ps).all()):
            stats.max_abs_qk = math.inf
        self._watch_gradient(x, stats, self._where(), lambda g: self._sample(g, g.dim() - 2))

    # -- report -----------------------------------------------------------

    def report(self) -> MonitorReport:
        """Return the records and findings gathered so far.

        Returns
        -------
        MonitorReport
            Records per call site and findings, errors first.
        """
        records = list(self._records.values())
        findings: list[Finding] = []
        for r in records:
            best: dict[str, Finding] = {}
            for s in r.series:
                for f in self._diagnose(r.where, s):
                    old = best.get(f.code)
                    if old is None or _SEVERITY_RANK[f.severity] >= _SEVERITY_RANK[old.severity]:
                        best[f.code] = f
            findings.extend(best.values())
        for where, msg in self._errors:
            findings.append(
                Finding(
                    "monitor-error",
                    "warning",
                    where,
                    f"The monitor failed to compute statistics here ({msg}). The model ran "
                    f"unchanged; this site's numbers are missing. Please report it. "
                    f"See {GUIDE_URL}{_GUIDE_PAGES['monitor-error']}",
                )
            )
        if not records:
            findings.append(
                Finding(
                    "no-attention",
                    "info",
                    "-",
                    "No attention computation was captured inside the with-block. The monitor sees "
                    "F.scaled_dot_product_attention, nn.MultiheadAttention, "
                    "nn.TransformerEncoderLayer "
                    "and softmax of a QK^T product computed with matmul/@/bmm; code that bound "
                    "these "
                    "functions to other names before the block, custom kernels and einsum are not "
                    f"seen. See {GUIDE_URL}{_GUIDE_PAGES['no-attention']}",
                )
            )
        findings.sort(key=lambda f: -_SEVERITY_RANK[f.severity])
        return MonitorReport(records=records, findings=findings)

    def _diagnose(self, where: str, s: AttentionStats) -> list[Finding]:
        th = self.thresholds
        out: list[Finding] = []
        step = f" (step {s.step})"

        def link(code: str) -> str:
            return f"See {GUIDE_URL}{_GUIDE_PAGES[code]}"

        if s.nonfinite_logits or s.nonfinite_weights:
            out.append(
                Finding(
                    "non-finite",
                    "error",
                    where + step,
                    (
                        f"Measured {s.nonfinite_logits} NaN/+inf logits and {s.nonfinite_weights} "
                        f"non-finite attention weights ({s.dtype}). NaN spreads to every output "
                        "and "
                        "gradient it touches. Look for overflow of QK^T in half precision, rows "
                        "whose "
                        "keys are all masked, or exploding activations; scale q before the "
                        "product, "
                        f"upcast the scores, or use a finite mask value. {link('non-finite')}"
                    ),
                )
            )
        if s.dtype == "float16" and s.max_abs_qk is not None:
            reach = s.max_abs_qk / _FP16_MAX
            if reach >= 1 / th["fp16_headroom"]:
                sev: Severity = "error" if reach >= 1 else "warning"
                out.append(
                    Finding(
                        "fp16-overflow-risk",
                        sev,
                        where + step,
                        (
                            f"Measured max |q·k| before scaling = {s.max_abs_qk:.4g}, "
                            f"{reach:.2g} of the float16 maximum 65504. Beyond it the product "
                            "becomes "
                            "inf and the softmax NaN. Multiply q by the scale before QK^T (or use "
                            "F.scaled_dot_product_attention), compute the scores in float32 or "
                            f"bfloat16, or normalise q and k. {link('fp16-overflow-risk')}"
                        ),
                    )
                )
        ratio = s.scale_ratio
        fit_ok = s.scale_fit_residual is None or s.scale_fit_residual < 0.1
        if ratio is not None and fit_ok and s.head_dim and ratio > 0:
            r = th["scale_ratio"]
            if ratio > r or ratio < 1 / r:
                cause = self._cause(ratio, s.head_dim, s.n_heads)
                healthy = th["min_logit_std"] <= s.logit_std <= th["max_logit_std"]
                if ratio > r:
                    harmful = s.logit_std > th["max_logit_std"]
                    effect = (
                        "the logits are wider than the scale intends, which sharpens "
                        "attention and grows with head_dim"
                    )
                else:
                    harmful = s.logit_std < th["min_logit_std"]
                    effect = (
                        "the logits are compressed, so attention stays close to uniform "
                        "and q/k weights must grow to focus"
                    )
                sev = "warning" if harmful else "info"
                note = (
                    ""
                    if harmful
                    else " The logits are nevertheless in a healthy range (std "
                    f"{s.logit_std:.3g} within [{th['min_logit_std']}, "
                    f"{th['max_logit_std']}]), so the scale may be folded into the "
                    "initialisation (as in T5); keep an eye on it during training."
                )
                if healthy and not harmful:
                    sev = "info"
                out.append(
                    Finding(
                        "scale-mismatch",
                        sev,
                        where + step,
                        (
                            f"Effective scale {s.scale:.4g} is {ratio:.3g} x 1/sqrt(head_dim) "
                            f"(head_dim {s.head_dim}); likely cause: {cause}. Measured within-row "
                            "logit "
                            f"std {s.logit_std:.3g}: {effect}.{note} Fix: multiply QK^T by "
                            f"1/sqrt(head_dim) exactly once. {link('scale-mismatch')}"
                        ),
                    )
                )
        big = th["large_logit_std"]
        sat = th["saturated_fraction"]
        if math.isfinite(s.logit_std) and (s.logit_std > big or s.saturated_fraction > sat):
            sev = (
                "error"
                if s.logit_std > 4 * big or s.saturated_fraction > min(5 * sat, 0.9)
                else "warning"
            )
            out.append(
                Finding(
                    "large-logits",
                    sev,
                    where + step,
                    (
                        f"Measured within-row logit std {s.logit_std:.3g}, max |logit| "
                        f"{s.max_abs_logit:.3g}, {100 * s.saturated_fraction:.3g}% of rows with "
                        "max "
                        f"probability > {th['saturation']}. The softmax is in its collapse region: "
                        "saturated rows pass almost no gradient and small input changes flip the "
                        "chosen key. Check the scale, add QK-LayerNorm or a logit soft-cap, or "
                        "lower "
                        f"the learning rate. {link('large-logits')}"
                    ),
                )
            )
        ent = th["entropy_fraction"]
        if s.min_head_entropy_fraction < ent:
            sev = "error" if s.min_head_entropy_fraction < ent / 4 else "warning"
            out.append(
                Finding(
                    "entropy-collapse",
                    sev,
                    where + step,
                    (
                        f"Measured entropy down to {s.min_head_entropy_fraction:.3g} of log(n) in "
                        "a "
                        f"head (mean over heads {s.entropy_fraction:.3g}; mean max probability "
                        f"{s.max_prob:.3g}): rows are near one-hot. Entropy collapse goes with "
                        "unstable "
                        "training (Zhai et al. 2023, arXiv:2303.06296) unless the task really "
                        "wants "
                        "one-hot attention. Lower the learning rate, add QK-LayerNorm or "
                        "sigma-reparam, "
                        f"and check the scale. {link('entropy-collapse')}"
                    ),
                )
            )
        return out

    @staticmethod
    def _cause(ratio: float, head_dim: int, n_heads: int | None) -> str:
        def near(x: float) -> bool:
            return abs(math.log(ratio / x)) < math.log(1.25)

        if near(math.sqrt(head_dim)):
            return (
                "no scale (the factor is about sqrt(head_dim)); if it is folded into the "
                "initialisation as in T5, this is intended"
            )
        if near(1 / math.sqrt(head_dim)):
            return (
                "double scaling (the factor is about 1/sqrt(head_dim), i.e. a total scale "
                "of 1/head_dim; intended only in muP-style models)"
            )
        if n_heads and n_heads > 1 and near(1 / math.sqrt(n_heads)):
            return "sqrt(d_model) used instead of sqrt(head_dim) (the factor is 1/sqrt(heads))"
        return "an unexplained factor; check every place the scores are multiplied"
