"""AttentionMonitor: the context manager users hold; the rest of the package does the work."""

from __future__ import annotations

import dataclasses
import difflib
import fnmatch
import inspect
import numbers
from collections.abc import Callable, Iterable, Mapping

import torch
from torch import nn

from .. import _checks
from .._strategies import ScoreScaling
from .capture import Capture
from .diagnosis import DESIGNS, GUIDE_PAGES, THRESHOLDS, compiled, diagnose, grouped, no_attention
from .facts import checked
from .metric_names import LOG_NAMES
from .report import (
    GUIDE_URL,
    SEVERITY_RANK,
    AttentionStats,
    Finding,
    MonitorReport,
)
from .run import Run

__all__ = ["AttentionMonitor"]

# what expected_scale accepts: one scale for every site, a mapping from site
# names or glob patterns to scales, or a function of (site, head_dim)
_ExpectedScale = (
    float | str | Mapping[str, float | str] | Callable[[str, int], "float | str | None"]
)


class AttentionMonitor:
    r"""Context manager that records attention statistics and diagnoses scaling bugs.

    Inside ``with AttentionMonitor(model) as monitor:`` every attention
    computation of ``model`` is measured: ``F.scaled_dot_product_attention``,
    ``nn.MultiheadAttention`` (every path, the fused fast paths included),
    ``F.multi_head_attention_forward``, ``nn.TransformerEncoderLayer``, and
    hand-written attention: a softmax (``softmax``, ``log_softmax``,
    ``exp(x - logsumexp(x))``, or ``exp`` normalised by hand) over the
    batched product of two activations written with ``@``, ``matmul``,
    ``bmm``, ``baddbmm`` or ``einsum``, with the scale on q, on k (before or
    after RoPE), on the product, per head, or on a slice of a fused
    projection, and masks, biases, sink columns and buffers on the way. The
    model runs exactly as without the monitor: outputs, gradients and
    exceptions are bitwise the same, ``torch.compile`` works inside the
    block (what runs in compiled kernels is not seen, and the report says
    so), and on exit torch is left as it was, in whatever order nested
    monitors exit. FlexAttention called eagerly is read: its ``scale=``
    times the slope of its ``score_mod`` (measured on a probe, so a bias or a
    soft-cap is no scale), with its block mask; so is FlexAttention under
    ``torch.compile`` (as ``transformers`` runs it, or the user's own
    ``torch.compile(flex_attention)``): the compiled code keeps its q, k,
    ``score_mod``, block mask and scale, read once it returns (path
    ``"flex_attention:compiled"``), while its kernel runs untouched.

    The effective scale $c$ of $\mathrm{softmax}(c\,q\cdot k)$ is read from
    the code (the SDPA argument, or the scalar factors on the way from
    $QK^\top$ to the softmax) and compared with $1/\sqrt{d_h}$, where $d_h$
    is the size that q·k sums over. A scale off by more than the
    ``scale_ratio`` threshold is a ``warning`` whatever the size of the
    logits, since a freshly initialised model has small logits whatever its
    scale; it is an ``error`` when the logits are already wide. It is only
    ``info`` when the monitor can tell it is deliberate: T5-style folded
    initialisation, recognised by queries about $\sqrt{d_h}$ times smaller
    than the keys; a learned temperature; q and k normalised per head, whose
    check is the bound the scale puts on the logits; or a scale declared with
    ``expected_scale`` (or by one of this library's strategies). A bug
    repeated at many sites is one finding that lists them.

    Each call is read while the model runs (a sample of its logits, and what its code
    says of the scale and masks); its statistics are computed when the outermost module
    returns, together with those of the other calls of that forward pass, so that a
    model's layers, which make calls of one shape, are measured in one pass. They are also
    computed before a step is logged, at [report][attnscale.AttentionMonitor.report], and
    on exit.

    Parameters
    ----------
    model : torch.nn.Module or iterable of them, optional
        The model or models to watch. Only attention inside them is
        recorded, and call sites are named by module path
        (``layers.0.self_attn``; with several models, prefixed by their
        index). Without a model every attention in the block is recorded,
        named by class path.
    expected_scale : float, str, mapping or callable, optional
        The scale the code is meant to apply, where it is not
        $1/\sqrt{d_h}$: one number for every site; the name of a design in
        [DESIGNS][attnscale.DESIGNS] (``"mup"`` for μP's $1/d_h$,
        ``"deberta"`` for $1/\sqrt{3 d_h}$, ``"t5"`` for a scale folded into the
        initialisation); a mapping from site names or glob patterns
        (``"*.attn"``) to numbers or design names, the first match winning; or a
        function ``(site, head_dim) -> float | str | None``, None meaning "not
        declared". A declared scale turns a matching non-standard scale into
        ``info``, and a scale that differs from it into a warning; the message
        says what was declared and what was measured. Sites built with one of
        this library's strategies ([ScoreScaling][attnscale.ScoreScaling]
        subclasses: ``inverse_d``, a learnable temperature at its current value...)
        declare their own scale. For MLA with
        YaRN, declare ``mscale**2 / sqrt(qk_head_dim)`` (DeepSeek's
        ``softmax_scale``) as a number.
    gradients : bool
        Record the gradient norm at the softmax input during backward, over
        the sampled rows. Hand-written attention: read from the softmax input
        itself, which is in the autograd graph. SDPA and
        ``nn.MultiheadAttention``: the logits never exist in the graph, so a
        hook on the attention output reads $dO$ and the monitor applies the
        softmax backward, $dS = P \odot (dP - \mathrm{rowsum}(dP \odot P))$
        with $dP = dO\,V^\top$ (for ``nn.MultiheadAttention``, $dO$ pulled
        back through ``out_proj`` first). This is exact without dropout on
        the weights; with dropout (``dropout_p > 0``, or a module in
        training with dropout) the mask is unknown and it stays None. It also
        stays None for the fused fast paths (they run without gradients), for
        FlexAttention (it has no backward on the CPU, where this could be
        tested) and when no backward pass runs inside the block. The hooks only read
        gradients, so backward is unchanged.
    all_rows : bool
        Also compute per-head statistics over every query row of each call (signed max
        logit as QK-Clip and cuDNN define it, entropy, log-sum-exp, first-key weight, masked
        rows, max |q·k|), from q and k in key chunks, into ``AttentionStats.heads``. For
        SDPA, ``nn.MultiheadAttention`` (the whole batch, with its masks), FlexAttention
        (its ``score_mod`` and block mask applied, a block of rows at a time) and
        hand-written attention (from its logits and the weights it computed, with no
        exponential). A head whose max logit passes the ``max_logit``
        threshold (QK-Clip's τ = 100) is a ``large-logits`` warning, with the step it first
        happened at over a run. Off by default: it reads every logit of each call again,
        about twenty passes over its scores (the temporaries in buffers of up to 2²⁰ values
        each, kept while the monitor lives); ``benchmarks/bench_monitor.py`` measures the
        cost.
    sample_batch : int
        Statistics use at most this many elements of the leading (batch) axis,
        which keeps the overhead low.
    max_query_rows : int
        ... and at most this many query rows (an evenly strided subset).
    max_sampled_logits : int
        ... fewer rows, down to 8, where ``max_query_rows`` of them would hold more than
        this many logits (sampled batch x heads x rows x keys): the cost of the statistics
        per call stays bounded for many heads and long sequences.
    every : int
        Over a training run: measure only every ``every``-th step. On the others the monitor
        intercepts nothing (its torch-function mode is off the stack); only the module hooks
        that count the steps run. The step is [step][attnscale.AttentionMonitor.step]:
        ``optimizer.step()`` calls if ``optimizer`` is given (gradient accumulation counts
        one step per update), else calls of the monitored model.
    history : int, optional
        Keep at most this many points per site, evenly spread over the run: when a site's
        list is full, every other point is dropped and the site keeps one call in two from
        then on. ``None`` keeps every point (a forward pass, a few steps).
    optimizer : torch.optim.Optimizer, optional
        The optimizer whose steps the monitor counts (a post-hook on ``optimizer.step``,
        kept while the monitor exists: steps taken outside its ``with`` block count too, so
        a loop may enter the monitor around each step).
    log : callable, optional
        Called once at the end of each measured step (after the optimizer's step, so
        gradient norms are in; without an optimizer, at the next model call or the block's
        end) with a flat dict of finite floats: ``attn/<site>/<statistic>`` for the
        sampled statistics, and with ``all_rows`` the per-head ``max_logit``, ``entropy``
        (mean $H/\log n$ over the rows) and QK-Clip's factor ``qk_clip`` =
        min(1, τ / max logit) (logged, never applied), plus
        ``attn/step``. A site called several times in a step (gradient accumulation) gives
        the largest of its maxima, the smallest of its minima and factors, the mean of the
        rest; under ``torch.distributed`` the processes' values combine the same way, in one
        collective per kind. ``log=wandb.log`` works as is; for TensorBoard,
        ``log=lambda d: [writer.add_scalar(k, v, int(d["attn/step"])) for k, v in d.items()]``;
        for a CSV file, a ``csv.writer`` row per item: ``(step, key, value)``.
    qk_clip_tau : float
        QK-Clip's threshold τ for the logged factors (Kimi K2 uses 100).
    log_names : str
        Whose key names the ``log`` dict also uses. ``"attnscale"`` (the default): this
        library's keys only. ``"megatron"``: also Megatron-LM's ``max_attention_logit``, under
        Megatron's definition, which differs from the per-head ``max_logit`` in two ways: one
        number for the whole model (the largest over every site and head) and never below 0
        (Megatron's running max starts at 0). It needs ``all_rows=True``, since Megatron's max
        covers every query row. The definitions side by side, with their sources:
        ``attnscale._monitor.metric_names.DEFINITIONS``.
    **thresholds : float
        Overrides of [THRESHOLDS][attnscale.THRESHOLDS], e.g. ``scale_ratio=2``.

    Raises
    ------
    TypeError
        If ``model`` is not an ``nn.Module`` (or an iterable of them: the message names the
        index of an element that is not), ``expected_scale`` is of another type, or a
        threshold is not a number.
    ValueError
        If a keyword is neither an argument nor a threshold (the message suggests the close
        name: ``evry=`` gives "did you mean 'every'?"), ``model`` is an empty iterable, or a
        threshold or an expected scale is out of range: shares and probabilities
        (``saturation``, ``saturated_fraction``, ``normalized_entropy``, ``mask_leak``,
        ``sink_weight``) in $(0, 1)$, ``positional_share`` in $(0, 1]$, ``mask_value`` below 0,
        ``scale_ratio`` and ``fp16_headroom`` at least 1, the others above 0.

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
        model: nn.Module | Iterable[nn.Module] | None = None,
        *,
        expected_scale: _ExpectedScale | None = None,
        gradients: bool = True,
        all_rows: bool = False,
        sample_batch: int = 2,
        max_query_rows: int = 64,
        max_sampled_logits: int = 2**16,
        every: int = 1,
        history: int | None = None,
        optimizer: torch.optim.Optimizer | None = None,
        log: Callable[[dict[str, float]], object] | None = None,
        qk_clip_tau: float = 100.0,
        log_names: str = "attnscale",
        **thresholds: float,
    ) -> None:
        self.models = _models(model)
        self.model = model
        if not isinstance(gradients, bool):
            raise TypeError(f"gradients must be a bool, got {type(gradients).__name__}")
        self.gradients = gradients
        if not isinstance(all_rows, bool):
            raise TypeError(f"all_rows must be a bool, got {type(all_rows).__name__}")
        self.all_rows = all_rows
        self.expected_scale = _expected(expected_scale)
        self.sample_batch = _checks.positive_int(sample_batch, "sample_batch")
        self.max_query_rows = _checks.positive_int(max_query_rows, "max_query_rows")
        self.max_sampled_logits = _checks.positive_int(max_sampled_logits, "max_sampled_logits")
        self.every = _checks.positive_int(every, "every")
        self.history = None if history is None else _checks.positive_int(history, "history")
        if self.history is not None and self.history < 2:
            raise ValueError(f"history must be at least 2 points, got {history!r}")
        if optimizer is not None and not isinstance(optimizer, torch.optim.Optimizer):
            raise TypeError(
                f"optimizer must be a torch.optim.Optimizer or None, got {type(optimizer).__name__}"
            )
        self.optimizer = optimizer
        if log is not None and not callable(log):
            raise TypeError(f"log must be a callable taking a dict, got {type(log).__name__}")
        self.log = log
        self.qk_clip_tau = _checks.positive_float(qk_clip_tau, "qk_clip_tau")
        self.log_names = _log_names(log_names, all_rows)
        self.thresholds = dict(THRESHOLDS)
        for name, value in thresholds.items():
            self.thresholds[name] = _threshold(name, value)
        self._capture: Capture | None = None
        self._active = False

    def __enter__(self) -> AttentionMonitor:
        if self._active:
            raise RuntimeError("this AttentionMonitor is already active")
        if self._capture is not None:  # entered again: go on with the same records and step
            self._capture.start()
            self._start_run()
            self._active = True
            return self
        self._capture = Capture(
            self.models,
            gradients=self.gradients,
            all_rows=self.all_rows,
            sample_batch=self.sample_batch,
            max_query_rows=self.max_query_rows,
            max_sampled_logits=self.max_sampled_logits,
            mask_value=self.thresholds["mask_value"],
            saturation=self.thresholds["saturation"],
        )
        self._capture.start()
        self._start_run()
        self._active = True
        return self

    def _start_run(self) -> None:
        capture = self._capture
        assert capture is not None
        if capture.run is None:
            capture.run = Run(
                capture,
                every=self.every,
                history=self.history,
                optimizer=self.optimizer,
                log=self.log,
                qk_clip_tau=self.qk_clip_tau,
                log_names=self.log_names,
            )
        else:
            capture.run.open()

    @property
    def step(self) -> int:
        """The current step: optimizer steps taken inside the block(s) if an optimizer was
        given, else calls of the monitored model (0 before the first)."""
        run = None if self._capture is None else self._capture.run
        return 0 if run is None else run.step

    def __exit__(self, *exc: object) -> None:
        self._active = False
        if self._capture is not None:
            self._capture.flush()  # before the run logs its last step
            if self._capture.run is not None:
                self._capture.run.close()
            self._capture.stop()

    def expected_scale_for(self, where: str, head_dim: int | None) -> float | None:
        """Return the scale declared for one call site with ``expected_scale``, if any.

        Raises
        ------
        ValueError
            If a callable ``expected_scale`` returns something that is not a
            positive number, a design name or None.
        """
        declared = self._declared(where, head_dim)
        return None if declared is None else declared[0]

    def _declared(self, where: str, head_dim: int | None) -> tuple[float, str] | None:
        """The declared scale of a site and who declared it, in words."""
        e = self.expected_scale
        value: object = None
        if isinstance(e, (float, str)):
            value = e
        elif isinstance(e, Mapping):
            value = next(
                (v for p, v in e.items() if where == p or fnmatch.fnmatchcase(where, p)), None
            )
        elif e is not None:
            value = _expected_value(e(where, head_dim or 0), "expected_scale(...)")
        if isinstance(value, str):
            label, scale = DESIGNS[value]
            return scale(head_dim or 1), f"with expected_scale={value!r} ({label})"
        if value is not None:
            return float(value), "with expected_scale"  # type: ignore[arg-type]
        return self._strategy_scale(where)

    def _strategy_scale(self, where: str) -> tuple[float, str] | None:
        """The scale a site built with one of this library's constant strategies declares."""
        capture = self._capture
        module = None if capture is None else capture.module(where.split("#")[0])
        if module is None:
            return None
        strategies = [m for m in module.modules() if isinstance(m, ScoreScaling)]
        if len(strategies) != 1:
            return None
        strategy = strategies[0]
        # a learnable strategy declares its current value: the geometric mean over heads,
        # as the monitor reads per-head scales
        scale = float(strategy.effective_scale().detach().float().log().mean().exp())
        return scale, f"by the site's attnscale strategy {strategy.name!r}"

    def report(self) -> MonitorReport:
        """Return the records and findings gathered so far.

        Returns
        -------
        MonitorReport
            Records per call site and findings, errors first.
        """
        capture = self._capture
        if capture is None:
            return MonitorReport(records=[], findings=[no_attention(0)])
        capture.flush()  # inside the block, calls since the model's last return
        # a snapshot: the monitor goes on appending to its records after this report
        records = [dataclasses.replace(r, series=list(r.series)) for r in capture.records.values()]
        per_site: list[tuple[Finding, AttentionStats]] = []
        for r in records:
            worst: dict[str, tuple[Finding, AttentionStats]] = {}
            first: dict[str, int] = {}
            for s in r.series:
                declared = self._declared(r.where, s.head_dim)
                expected, by = declared if declared else (None, "")
                for f in diagnose(r.where, s, self.thresholds, expected, declared_by=by):
                    first.setdefault(f.code, s.run_step)
                    old = worst.get(f.code)
                    if old is None or SEVERITY_RANK[f.severity] >= SEVERITY_RANK[old[0].severity]:
                        worst[f.code] = (f, s)
            over_a_run = len({s.run_step for s in r.series}) > 1
            per_site.extend(
                (dataclasses.replace(f, first_step=first[code] if over_a_run else None), s)
                for code, (f, s) in worst.items()
            )
        findings = grouped(per_site)
        for (where, msg), times in capture.errors.items():
            findings.append(
                Finding(
                    "monitor-error",
                    "warning",
                    where,
                    f"The monitor failed to compute statistics here ({msg}; {times} time(s)). "
                    f"The model ran unchanged, but this site's numbers are missing. Please "
                    f"report it. See {GUIDE_URL}{GUIDE_PAGES['monitor-error']}",
                )
            )
        for where, calls in capture.compiled.items():
            if not any(r.where == where or r.where.startswith(f"{where}.") for r in records):
                findings.append(compiled(where, calls))  # nothing was seen inside it
        if not records:
            findings.append(no_attention(capture.unmatched_softmax))
        findings.sort(key=lambda f: -SEVERITY_RANK[f.severity])
        return MonitorReport(records=records, findings=findings)


def _log_names(value: object, all_rows: bool) -> str:
    if not isinstance(value, str):
        raise TypeError(f"log_names must be a string, got {type(value).__name__}")
    if value not in LOG_NAMES:
        raise ValueError(
            f"log_names must be one of {', '.join(map(repr, LOG_NAMES))}; got {value!r}"
        )
    if value == "megatron" and not all_rows:
        raise ValueError(
            "log_names='megatron' needs all_rows=True: Megatron-LM's max_attention_logit is a "
            "max over every query row, which the sampled statistics do not cover"
        )
    return value


def _models(model: object) -> list[nn.Module]:
    if model is None:
        return []
    if isinstance(model, nn.Module):
        return [model]
    if isinstance(model, Iterable) and not isinstance(model, (str, bytes)):
        models = list(model)
        if not models:
            raise ValueError(f"model is an empty {type(model).__name__}: pass at least one module")
        for i, m in enumerate(models):
            if not isinstance(m, nn.Module):
                raise TypeError(
                    f"model[{i}] must be a torch.nn.Module, got {type(m).__name__} "
                    f"{_checks.show(m)[:60]}"
                )
        return models
    raise TypeError(
        f"model must be a torch.nn.Module, an iterable of them, or None; got {type(model).__name__}"
    )


def _expected_value(value: object, name: str) -> float | str | None:
    """A declared scale: a positive number, the name of a design, or None."""
    if value is None:
        return None
    if isinstance(value, str):
        if value not in DESIGNS:
            raise ValueError(
                f"{name} must be a number or one of the designs {', '.join(DESIGNS)}; got {value!r}"
            )
        return value
    if isinstance(value, numbers.Real):
        return _checks.positive_float(value, name)  # bool: a TypeError there
    raise TypeError(f"{name} must be a number or a design name, got {type(value).__name__}")


def _expected(value: object) -> _ExpectedScale | None:
    if value is None or callable(value):
        return value
    if isinstance(value, Mapping):
        out: dict[str, float | str] = {}
        for k, v in value.items():
            if not isinstance(k, str):
                raise TypeError(f"expected_scale keys must be site names, got {type(k).__name__}")
            out[k] = _expected_value(v, f"expected_scale[{k!r}]")  # type: ignore[assignment]
        return out
    if isinstance(value, (numbers.Real, str)):
        return _expected_value(value, "expected_scale")
    raise TypeError(
        "expected_scale must be a number, a design name, a mapping from site names to "
        f"either, or a callable (site, head_dim) -> either; got {type(value).__name__}"
    )


def _unknown_argument(name: str) -> ValueError:
    """The error for a keyword that is neither an argument nor a threshold: the close name."""
    arguments = [p for p in inspect.signature(AttentionMonitor).parameters if p != "thresholds"]
    close = difflib.get_close_matches(name, [*arguments, *THRESHOLDS], n=1)
    if close:
        what = "the threshold " if close[0] in THRESHOLDS else ""
        return ValueError(f"unknown argument {name!r}: did you mean {what}{close[0]!r}?")
    return ValueError(
        f"unknown argument {name!r}; AttentionMonitor takes {', '.join(arguments)} and the "
        f"thresholds {', '.join(sorted(THRESHOLDS))}"
    )


def _threshold(name: str, value: object) -> float:
    if name not in THRESHOLDS:
        raise _unknown_argument(name)
    return checked(name, value)
