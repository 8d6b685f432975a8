r"""Capture: intercept attention computations and turn each into statistics.

Interception is a [torch.overrides.TorchFunctionMode][] (the mechanism of
``torch.utils.flop_counter.FlopCounterMode``), not patched module attributes:
it sees every torch function and ``Tensor`` method however the model bound it
(``torch.softmax``, ``F.softmax(input=...)``, a local alias made before the
block, ``@``, ``einsum`` ...), nests as a stack, and touches no global name,
so nothing is left behind after exit. What each torch function is to the
monitor is one table, ``calls.HANDLERS``, filled by the ``@handles`` decorator: a step on the
way from q·kᵀ to the softmax, followed by the lineage (``lineage``), or an
attention call site, handled here or by a per-path adapter (``adapters``).
Module paths come from global module hooks (``hooks``).

Per path:

- Hand-written attention: every product of two activations (``@``,
  ``matmul``, ``bmm``, ``baddbmm``, two-operand ``einsum``) starts a
  lineage, which follows the product through views, casts, scalar factors,
  additive masks and biases, ``masked_fill`` and a ``tanh`` soft-cap. A
  softmax over the last axis of such a tensor is attention, and the scale is
  the product of the scalar factors met on the way, including those applied
  to q or k before the product (``q = qkv[0] * scale``). A product with a
  parameter (a classifier head) starts no lineage. Where the path went
  through an operation the lineage does not follow, the softmax input is
  matched to the most recent product of its shape and the scale is fitted.
- ``F.scaled_dot_product_attention``, ``nn.MultiheadAttention`` and the fused
  ``nn.TransformerEncoderLayer``: see ``adapters``. While either module runs,
  every monitor's mode is taken off the stack, so PyTorch's check for an
  active mode does not switch their fused fast paths off (outputs stay
  bitwise identical).
- ``torch.compile``: dynamo traces the monitor's hooks and mode as no-ops, so
  compiled code runs as without the monitor; it cannot be seen into, and each
  call into a compiled module is counted so that the report says so.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import functools
import math
import sys
import weakref
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.overrides import TorchFunctionMode

from . import adapters, calls
from . import compiled as _compiled  # noqa: F401  (its handlers fill calls.TRACED)
from .calls import HANDLERS, PATHS, TRACED, Call, handles
from .every_row import RowStats, head_stats_of_logits, per_head_of, rows_of_logits
from .hooks import REGISTRY, set_stack, stack_snapshot
from .lineage import (
    EXP,
    FOLLOWED,
    LOG_SOFTMAX,
    PRODUCT,
    SOFTMAX,
    Lineage,
    Lineages,
    Product,
    arg,
    einsum_layout,
    einsum_operands,
    head_scales,
    is_batched,
    mean_factor,
    physical,
    position_range,
    replaced,
    unscaled,
    value,
)
from .report import AttentionRecord, AttentionStats
from .run import Run
from .scratch import Pool, pooled
from .stats import RowSums, grouped_logit_stats, grouped_qk_spreads, row_sums

__all__ = ["Capture"]

_BADDBMM = {torch.baddbmm, torch._C.TensorBase.baddbmm}
_AUTOCAST_DEVICES = ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",)
#: the fewest query rows a call's statistics use, however large its heads and keys
MIN_ROWS = 8
#: calls kept for their statistics before a flush, where no module's end comes (functional
#: attention outside any module, in a loop)
MAX_PENDING = 64


@dataclasses.dataclass
class Pending:
    """One call read and not yet measured: what its statistics need, and nothing of the
    model's tensors that the model would free meanwhile (q and k are kept as their row sums,
    the every-row statistics are taken at once)."""

    where: str
    record: AttentionRecord
    call: Call
    rows: torch.Tensor | None
    q: RowSums | None
    k: RowSums | None
    qk_rows: bool  # q and k kept one query (key) per row
    head_dim: int | None
    heads: RowStats | dict[str, list[float | None]] | None  # reduced per head at the flush
    run_step: int
    stats: AttentionStats | None = None
    grad_norm: float | None = None  # a gradient that came before the statistics


class Capture(TorchFunctionMode):
    """The interception and per-path adapters of one monitor; see the module docs."""

    def __init__(
        self,
        models: Sequence[nn.Module],
        *,
        gradients: bool,
        sample_batch: int,
        all_rows: bool = False,
        max_query_rows: int,
        max_sampled_logits: int = 2**16,
        mask_value: float,
        saturation: float,
    ) -> None:
        super().__init__()
        self.gradients = gradients
        self.all_rows = all_rows
        self.measuring = True  # off on the steps a run's schedule skips
        self.run: Run | None = None
        self.sample_batch = sample_batch
        self.max_query_rows = max_query_rows
        self.max_sampled_logits = max_sampled_logits
        self.rows = max_query_rows  # the query rows sampled in the current call
        self.mask_value = mask_value
        self.saturation = saturation
        self.names: dict[int, str] = {}
        self._by_name: dict[str, nn.Module] = {}  # the reverse, for report time
        prefix = len(models) > 1
        for i, model in enumerate(models):
            for name, m in _module_names(model):
                full = f"{i}.{name}" if prefix and name else (f"{i}" if prefix else name)
                if id(m) not in self.names:
                    self.names[id(m)] = full or type(m).__name__
                    self._by_name.setdefault(self.names[id(m)], m)
        self.models = list(models)
        self._root_ids = {id(m) for m in self.models}
        self.records: dict[tuple[str, str], AttentionRecord] = {}
        self.errors: collections.Counter[tuple[str, str]] = collections.Counter()  # and count
        # per (module, kind): the code locations of its attention calls, in the order first met
        self.places: dict[tuple[str, str], dict[tuple[tuple[str, int], ...], int]] = {}
        self.unmatched_softmax = 0
        self.compiled: collections.Counter[str] = collections.Counter()  # calls per site
        # calls that compiled code made, kept by its traced side effect (``compiled``)
        self.traced: list[tuple[Any, tuple[Any, ...], dict[str, Any]]] = []
        # where in ``traced`` the calls go that a graph running in Python (dynamo's "eager"
        # backend, eager flex_attention's own) showed the mode eagerly, and keeps as well
        self._read_eagerly: list[int] = []
        self.active = False
        self.lineages = Lineages(mask_value)
        self._recent: collections.deque[Product] = collections.deque(maxlen=4)
        # products already measured at a softmax: an exp after their logsumexp is the same call.
        # Weak references: strong ones kept 16 layers' logits alive into the next layers, whose
        # tensors then came from fresh memory pages (page faults), not from the ones they freed
        self._measured: collections.deque[weakref.ref[Product]] = collections.deque(maxlen=16)
        self._param_ptrs: dict[int, set[int]] = {}
        self._pending: list[Pending] = []
        self.pool = Pool()  # the every-row passes' temporaries, kept for the monitor's life
        self._row_index: dict[tuple[int, int, torch.device | None], torch.Tensor] = {}
        # the weights of the latest softmaxes read: their product with v is no q·kᵀ
        self._weights: collections.deque[weakref.ref[torch.Tensor]] = collections.deque(maxlen=4)

    # -- life cycle -------------------------------------------------------

    def start(self) -> None:
        # Where dynamo gives up on a frame (a user function that raises, say), the frame runs
        # eagerly and dynamo compiles the frames it calls one by one, this method among them.
        # Compiled on its own it returned wrong values (flex_attention's `query.dim()` came
        # back False). Skipped as a frame of its own, it is still traced inside compiled code.
        skip_code = getattr(torch._dynamo.eval_frame, "skip_code", None)  # not in every torch
        if skip_code is not None:
            skip_code(Capture.__torch_function__.__code__)
        REGISTRY.add(self)
        if self.measuring:
            self._place_mode(True)
        self.active = True

    def stop(self) -> None:
        self.read_traced()
        self.flush()
        self.active = False
        self._place_mode(False)
        REGISTRY.remove(self)
        self.lineages.clear()
        self._recent.clear()

    def set_measuring(self, on: bool) -> None:
        """Measure from now on, or not. Not measuring, the mode leaves the torch-function
        stack, so the steps a run's schedule skips pay nothing for the interception."""
        if on == self.measuring:
            return
        self.measuring = on
        if self.active:  # else start() places the mode
            self._place_mode(on)

    def _place_mode(self, on: bool) -> None:
        """Put this mode on top of the torch-function stack, or take it off wherever it is
        (monitors may exit in any order); while a fused module runs with every monitor's mode
        off, on or off the stack that module's end restores."""
        if REGISTRY.suspended is not None:
            module, modes = REGISTRY.suspended
            modes = [m for m in modes if m is not self]
            REGISTRY.suspended = (module, [*modes, self] if on else modes)
        elif on:
            torch._C._push_on_torch_function_stack(self)
        else:
            set_stack([m for m in stack_snapshot() if m is not self])

    # -- where are we ---------------------------------------------------------

    def where(self) -> str | None:
        """The innermost monitored module running now; None outside the monitored models."""
        stack = REGISTRY.stack
        if self.names:
            for m in reversed(stack):
                name = self.names.get(id(m))
                if name is not None:
                    return name
            return None
        if not stack:
            return "<top level>"
        return ".".join(type(m).__name__ for m in stack)

    def module(self, name: str) -> nn.Module | None:
        """The monitored module a site is named after, if the monitor was given models."""
        return self._by_name.get(name)

    def on_model_call(self, module: nn.Module, stack: list[nn.Module]) -> None:
        """A module starts: a monitored model entered from outside itself is a new call."""
        if not isinstance(module, torch.fx.GraphModule):  # a graph runs inside compiled code
            self.read_traced()
        if self.run is None or not self.active:
            return
        roots = self._root_ids
        if id(module) in roots and not any(id(m) in roots for m in stack):
            self.flush()  # the last call's statistics belong to its step
            self.run.on_model_call()

    def on_compiled(self, module: nn.Module) -> None:
        """Count a call into a ``torch.compile``d module: its inside runs unseen."""
        if not self.active:
            return
        inner: nn.Module = module._orig_mod  # type: ignore[assignment]
        where = self.names.get(id(module)) or self.names.get(id(inner))
        if where is not None:  # what a graph run eagerly (backend="eager") calls is its site's
            self.names.setdefault(id(module), where)
        if where is None and self.names:  # a compiled model that holds a monitored one
            ids = {id(m) for m in inner.modules()}
            if not any(id(m) in ids for m in self.models):
                return
            where = type(inner).__name__
        self.compiled[where or type(inner).__name__] += 1

    def _site(self, kind: str, where: str) -> AttentionRecord:
        """The record of the site running now: its module, and where in the code the call
        is, so that a line called again (a loop over windows, ``generate()`` inside a forward)
        is one site whose calls are counted, whatever the input. A module with attention at
        two places in its code has sites ``where`` and ``where#1``, in the order first met."""
        ordinal = 0
        if REGISTRY.stack:  # calls outside any module all belong to one site per kind
            places = self.places.setdefault((where, kind), {})
            ordinal = places.setdefault(_code_location(), len(places))
        key = (where if ordinal == 0 else f"{where}#{ordinal}", kind)
        return self.records.get(key) or AttentionRecord(where=key[0], kind=kind)

    def _is_parameter(self, t: torch.Tensor) -> bool:
        if isinstance(t, nn.Parameter) or isinstance(t._base, nn.Parameter):
            return True
        roots = self.models or REGISTRY.stack[:1]
        ptr = _storage(t)
        if ptr is None:
            return False
        for root in roots:
            ptrs = self._param_ptrs.get(id(root))
            if ptrs is None:
                ptrs = self._param_ptrs[id(root)] = _storages(root)
            if ptr in ptrs:
                return True
        return False

    # -- the interception ---------------------------------------------------

    def __torch_function__(
        self,
        func: Callable[..., Any],
        types: Any,
        args: tuple[Any, ...] = (),
        kwargs: dict[str, Any] | None = None,
    ) -> Any:
        kwargs = kwargs or {}
        compiling = torch.compiler.is_compiling()
        if not compiling and self.traced and _from_user_code():
            self.read_traced()
        out = func(*args, **kwargs)
        if compiling:
            if self.active and self.measuring and func in TRACED:
                # dynamo makes this append a side effect of the compiled code (and guards on
                # the list's length). The outputs stay in the kernel: as outputs of the
                # graph, inductor's CPU kernel fails
                self.traced.append((func, args, kwargs))
            return out
        if not (self.active and self.measuring):
            return out
        if _is_traced(func):
            self._kept_by_python_graph()
        if self.names and not REGISTRY.stack:
            # outside every module (the loss, the optimizer's update): no attention of the
            # monitored models runs here, and following its lineages would cost a step's worth
            return out
        try:
            followed = func in FOLLOWED
            handler = None if followed else HANDLERS.get(func)
        except TypeError:  # an unhashable callable: nothing the monitor follows
            return out
        if followed:
            try:
                self.lineages.follow(func, args, kwargs, out)
            except Exception as err:  # never break the model: the lineage ends, and is reported
                self.errors[(self.where() or "-", f"lineage: {type(err).__name__}: {err}")] += 1
        elif handler is not None:
            where = self.where()
            if where is not None:  # inside the monitored models
                kind, handle = handler
                self._guarded(where, kind, lambda: handle(self, func, args, kwargs, out))
        return out

    def _kept_by_python_graph(self) -> None:
        """A call that compiled code keeps, seen now: where a graph that runs in Python
        (dynamo's "eager" backend, eager flex_attention's own) made it, the graph keeps it
        too, after the calls kept before the graph ran; that one is not read again."""
        if _in_python_graph():
            n = len(self.traced)
            self._read_eagerly.append(n + sum(i >= n for i in self._read_eagerly))

    def read_traced(self) -> None:
        """Read the calls compiled code kept (``compiled``) with their handlers, at the site
        running now: the compiled code has just returned to it."""
        if not self.traced or torch._guards.CompileContext.try_get() is not None:
            return  # nothing kept, or torch's own work while it compiles
        kept = [c for i, c in enumerate(self.traced) if i not in self._read_eagerly]
        self.traced.clear()  # the same list: the compiled code appends to it
        self._read_eagerly.clear()
        where = self.where()
        if where is None or not self.active:
            return
        for func, args, kwargs in kept:
            kind, handle = TRACED[func]
            self._guarded(where, kind, functools.partial(handle, self, func, args, kwargs, None))

    @staticmethod
    @contextlib.contextmanager
    def _own_work() -> Iterator[None]:
        """Run the monitor's own computations unseen, and outside autocast.

        Unseen: no mode (this one's or another monitor's) intercepts them.
        Outside autocast: an fp16 autocast around the model must not make the monitor's
        float32 recomputation overflow.
        """
        with torch._C.DisableTorchFunction(), torch.no_grad():
            # The statistics are computed in the dtype the monitor chooses (float32), not
            # in the one an autocast region around the model would pick. Entering autocast
            # costs more than a small statistic: only where it is on.
            devices = [d for d in _AUTOCAST_DEVICES if torch.is_autocast_enabled(d)]
            if not devices:
                yield
                return
            with contextlib.ExitStack() as stack:
                for device in devices:
                    stack.enter_context(torch.autocast(device, enabled=False))
                yield

    def _guarded(self, where: str, kind: str, read: Callable[[], Call | None]) -> None:
        """Read one call with its handler and record it; an error is counted, not raised."""
        self.rows = self.max_query_rows  # until the call's shape is known (size_sample)
        try:
            with self._own_work():
                call = read()
                if call is not None:
                    self.record(where, call)
        except Exception as err:  # never break the model: report instead
            self.errors[(where, f"{kind}: {type(err).__name__}: {err}")] += 1

    # -- hand-written attention ----------------------------------------------

    def _on_product(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: Any,
    ) -> None:
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return
        if physical(out).dim() < 3:
            # scores without a batch axis compare across samples (a contrastive image-text
            # head): attention compares positions within each sample
            return
        found = _operands(func, args, kwargs)
        if found is None:
            return
        if self._mixed_across_heads(found[0], found[1], out):
            return
        a, b, head_dim, factor, q_rows, k_rows, (q_axis, k_axis) = found
        if any(w() is a or w() is b for w in self._weights):
            return  # the weights times v: attention's output, no new scores
        if self._is_parameter(a) or self._is_parameter(b):
            return  # an activation times a parameter: a classifier head, not q·kᵀ
        prescaled = [self.lineages.prescaled(t) for t in (a, b)]  # factors on q and k
        vmapped = is_batched(out)  # inside torch.vmap: statistics of the whole batch
        if vmapped:
            q_axis = k_axis = None  # the logical axes are not the physical tensor's
        scores = physical(out)
        self.size_sample(scores.shape)
        max_abs = None
        if out.dtype == torch.float16:
            o = self.sample(scores, scores.dim() - 2).float()
            max_abs = math.inf if not bool(torch.isfinite(o).all()) else float(o.abs().max())
        product = Product(
            out=scores.detach(),
            q=physical(a).detach(),
            k=physical(b).detach(),
            head_dim=head_dim,
            max_abs_qk=max_abs,
            q_rows=physical(q_rows).detach(),
            k_rows=physical(k_rows).detach(),
            q_prescale=self.lineages.prescale(a),
            k_prescale=self.lineages.prescale(b),
            q_axis=q_axis,
            k_axis=k_axis,
        )
        self.lineages.set(out, _scores_lineage(product, factor, prescaled))
        self._recent.append(product)

    def _mixed_across_heads(self, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor) -> bool:
        """Whether this product maps scores linearly over their head axis (talking-heads
        attention: ``einsum("bhij,hg->bgij")``, or ``@`` in a heads-last layout); the result
        then carries the scores' lineage. Only one axis may change size, the heads'."""
        for scores, other in ((a, b), (b, a)):
            lin = self.lineages.of(scores)
            if lin is None or lin.product is None:
                continue
            theirs = self.lineages.of(other)
            if theirs is not None and theirs.product is not None:
                return False  # scores times scores: not a map over heads
            changed = sum(i != j for i, j in zip(scores.shape, out.shape, strict=False))
            if out.dim() == scores.dim() and changed <= 1:
                keep = (
                    lin.factor * mean_factor(lin.head_factor)
                    if lin.head_factor is not None
                    else lin.factor
                )
                self.lineages.set(
                    out,
                    Lineage(lin.product, keep, learned=lin.learned, cap_input=lin.cap_input),
                )
            return True
        return False

    def _on_softmax(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        out: Any,
    ) -> Call | None:
        found = _softmax_input(func, args, kwargs)
        if found is None:
            return None
        x, dim = found
        lin, given, weights = self.lineages.of(x), x, out  # the tensors the model used
        if lin is not None and lin.product is not None and lin.product.edges:
            return self._on_edge_softmax(func, x, lin)
        placed = _keys_placed(x, dim, lin, out)
        if placed is None:
            return None
        x, out, lin, moved = placed
        if func in EXP and (lin is None or lin.product is None):
            return None  # exp of anything but scores is no softmax
        matched = self._matched(func, x, lin)
        if matched is None:
            return None
        product, read = matched
        if func in SOFTMAX and isinstance(weights, torch.Tensor):
            self._weights.append(weakref.ref(weights))
        if is_batched(x):  # inside torch.vmap: the whole batch, the shift is per sample
            x, out = physical(x), physical(out)
            lin = None if lin is None else replaced(lin, row_shift=None, mask=None)
        grad = lambda g: self.sample(_keys_last(g, moved), g.dim() - 2)  # noqa: E731
        return self._softmax_call(func, x, out, lin, product, read, gradient=(given, grad))

    def _matched(
        self, func: Callable[..., Any], x: torch.Tensor, lin: Lineage | None
    ) -> tuple[Product, dict[str, Any]] | None:
        """The product a softmax input comes from and the scale read on the way: traced
        along its lineage, or else fitted against the latest product of its shape."""
        if lin is not None and lin.product is not None:
            if func in EXP and any(p() is lin.product for p in self._measured):
                return None  # exp(x - logsumexp(x)): measured at the logsumexp
            self._measured.append(weakref.ref(lin.product))
            return lin.product, _read_scale(lin, x)
        found = next((p for p in reversed(self._recent) if p.out.shape == x.shape), None)
        read = None if found is None else self._fit(x, found)
        if found is None or read is None or read["scale"] is None:
            # no product of that shape, or not a multiple of it: a classifier's logits
            self.unmatched_softmax += 1
            return None
        return found, read

    def _softmax_call(
        self,
        func: Callable[..., Any],
        x: torch.Tensor,
        out: Any,
        lin: Lineage | None,
        product: Product,
        read: dict[str, Any],
        gradient: tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]],
    ) -> Call:
        """The sampled statistics' inputs of a softmax over q·kᵀ (keys last)."""
        self.size_sample(x.shape)
        scores = _unshifted(x, lin)
        q_rows, k_rows = product.q_rows, product.k_rows
        assert q_rows is not None and k_rows is not None
        full_mask = lin.mask if lin is not None and lin.mask is not None else None
        full_mask = full_mask if full_mask is not None and full_mask.shape == x.shape else None
        sink = lin.sink if lin is not None and lin.sink is not None else None
        sink = sink if sink is not None and sink.shape == x.shape[-1:] else None
        weights = func in SOFTMAX and isinstance(out, torch.Tensor)  # not log_softmax, logsumexp
        return Call(
            kind="softmax(QK^T)",
            path="softmax",
            logits=self.sample(scores, x.dim() - 2).float(),
            mask=None if full_mask is None else self.sample(full_mask, x.dim() - 2),
            sink=sink,
            shape=tuple(x.shape),
            dtype=product.out.dtype,
            head_dim=product.head_dim,
            num_heads=int(x.shape[-3]) if x.dim() >= 4 else None,
            q=self.sample(product.q),
            k=self.sample(product.k),
            outputs=self.sample(out, out.dim() - 2) if weights else None,
            max_abs_qk=product.max_abs_qk,
            # as before the factors on q and k, which the scale includes
            q_rows=unscaled(self.sample(q_rows, q_rows.dim() - 2), product.q_prescale),
            k_rows=unscaled(self.sample(k_rows), product.k_prescale),
            heads=lambda: rows_of_logits(
                scores,
                masked=_masked(scores, full_mask, sink, self.mask_value),
                raw=product.out,
                # the model's weights, where they are the softmax over the keys alone
                probs=out if weights and sink is None else None,
            ),
            gradient=gradient,
            **read,
        )

    def _on_edge_softmax(
        self, func: Callable[..., Any], x: torch.Tensor, lin: Lineage
    ) -> Call | None:
        """A softmax over per-edge scores, grouped by query node (torch-geometric's
        ``TransformerConv``: ``exp``, then a scatter-sum per node), laid out as rows of
        keys: one row per query node, its edges as keys, padded with -inf."""
        product = lin.product
        assert product is not None
        if lin.groups is None or func not in EXP or any(p() is product for p in self._measured):
            return None  # without the grouping there are no rows to read
        self._measured.append(weakref.ref(product))
        scores = x.detach() if lin.row_shift is None else x.detach() + lin.row_shift
        dense = _by_query(scores, lin.groups)  # (1, heads, nodes, most edges per node)
        self.size_sample(dense.shape)
        return Call(
            kind="softmax(QK^T)",
            path="softmax:edges",
            logits=self.sample(dense, 2).float(),
            shape=tuple(dense.shape),
            dtype=product.out.dtype,
            head_dim=product.head_dim,
            num_heads=int(dense.shape[1]),
            q=product.q,
            k=product.k,
            q_rows=product.q_rows,
            k_rows=product.k_rows,
            heads=lambda: head_stats_of_logits(dense),
            **_read_scale(lin, dense),
        )

    def _fit(self, x: torch.Tensor, product: Product) -> dict[str, Any]:
        """Least-squares factor c in x ≈ c·product, and its relative residual."""
        xs = self.sample(x, x.dim() - 2).float()
        ps = self.sample(product.out, product.out.dim() - 2).float()
        ok = torch.isfinite(xs) & torch.isfinite(ps) & (xs > self.mask_value)
        xv, pv = xs[ok], ps[ok]
        den = float((pv * pv).sum())
        if den <= 0.0:
            return {"scale": None, "source": "fitted"}
        c = float((xv * pv).sum()) / den
        nx = float(xv.norm())
        resid = float((xv - c * pv).norm()) / nx if nx > 0 else 0.0
        return {"scale": c if resid < 0.1 else None, "source": "fitted", "fit_residual": resid}

    # -- sampling and recording ------------------------------------------------

    def size_sample(self, shape: Sequence[int]) -> None:
        """Sample fewer query rows in this call where ``max_query_rows`` of them would hold
        more than ``max_sampled_logits`` logits (many heads, long keys), but at least
        ``MIN_ROWS``: the statistics' cost per call stays bounded whatever the shape.
        ``shape`` is the logits' full shape, (..., query rows, keys)."""
        per_row = shape[-1]  # keys, times the sampled batch and the heads where there are some
        if len(shape) >= 3:
            per_row *= min(shape[0], self.sample_batch) * math.prod(shape[1:-2])
        fit = self.max_sampled_logits // max(per_row, 1)
        self.rows = max(MIN_ROWS, min(self.max_query_rows, fit))

    def row_index(self, n: int, device: torch.device | None = None) -> torch.Tensor:
        """The sampled rows of ``n`` (a strided subset of ``self.rows`` of them), on
        ``device`` (the CPU by default); one tensor per shape, kept: not to be written."""
        key = (n, self.rows, device)
        found = self._row_index.get(key)
        if found is None:
            if len(self._row_index) > 256:  # a generation loop meets a new length each step
                self._row_index.clear()
            step = math.ceil(n / self.rows) if n > self.rows else 1
            found = self._row_index[key] = torch.arange(0, n, step, device=device)
        return found

    def sample(self, t: torch.Tensor, rows_dim: int | None = None) -> torch.Tensor:
        """Keep the first ``sample_batch`` batch elements and a strided subset of rows."""
        t = t.detach()
        if t.dim() >= 3 and t.shape[0] > self.sample_batch:
            t = t[: self.sample_batch]
        if rows_dim is not None:
            n = t.shape[rows_dim]
            if n > self.rows:
                t = t.index_select(rows_dim, self.row_index(n, t.device))
        return t

    def record(self, where: str, call: Call) -> Pending:
        """Keep one call, as its handler read it, for its statistics at its site (computed
        with other calls' at the next [flush][]); watch the gradient at its logits where the
        call says how."""
        rows = call.q_rows is not None and call.k_rows is not None
        q, k = (call.q_rows, call.k_rows) if rows else (call.q, call.k)
        head_dim = call.head_dim
        if rows and head_dim is not None:
            head_dim = _used_dims(q, k, head_dim)  # type: ignore[arg-type]
        entry = Pending(
            where=where,
            record=self._site(call.kind, where),
            call=replaced(
                call, q=None, k=None, q_rows=None, k_rows=None, heads=None, gradient=None
            ),
            rows=self.row_index(call.shape[-2]) if len(call.shape) >= 2 else None,
            q=row_sums(q),
            k=row_sums(k),
            qk_rows=rows,
            head_dim=head_dim,
            heads=self._every_row(call),
            run_step=0 if self.run is None else self.run.step,
        )
        self._pending.append(entry)
        if call.gradient is not None:
            self.watch_gradient(*call.gradient, entry, where)
        if len(self._pending) >= MAX_PENDING:
            self.flush()
        return entry

    def flush(self) -> None:
        """Measure the calls kept since the last flush, and record them at their sites.

        Calls of one shape (a model's layers) are measured together, joined along the heads
        axis, on one thread: the statistics are a few hundred small operations per call
        whatever its size, each a parallel region on several threads that can stall for a
        scheduler time slice on a busy machine; and one thread gives the same bits on any
        number of cores. The thread count changes once per flush, not per call (a change
        clears oneDNN's cache and resizes torch's thread pools)."""
        if not self._pending:
            return
        try:
            with self._own_work(), self._single_thread():
                self._flush()
        except Exception as err:  # never break the model: report instead
            self.errors[("-", f"statistics: {type(err).__name__}: {err}")] += 1
            self._pending.clear()

    @staticmethod
    @contextlib.contextmanager
    def _single_thread() -> Iterator[None]:
        threads = torch.get_num_threads()
        if threads != 1:
            torch.set_num_threads(1)
        try:
            yield
        finally:
            if threads != 1:
                torch.set_num_threads(threads)

    def _flush(self) -> None:
        pending, self._pending = self._pending, []
        groups: dict[tuple[Any, ...], list[Pending]] = {}
        for entry in pending:
            groups.setdefault(_group_key(entry), []).append(entry)
        measured: dict[int, dict[str, Any]] = {}
        for key, members in groups.items():
            for entry, stats in zip(members, self._grouped(members, key), strict=True):
                if stats is not None:
                    measured[id(entry)] = stats
        self._per_head(pending)
        spreads = grouped_qk_spreads([(e.q, e.k, e.call.scale, e.qk_rows) for e in pending])
        for entry, spread in zip(pending, spreads, strict=True):  # in the order of the calls
            if id(entry) in measured:
                self._store(entry, measured[id(entry)], spread)

    def _grouped(self, members: list[Pending], key: tuple[Any, ...]) -> list[dict[str, Any] | None]:
        """The statistics of calls of one group (``_group_key``), together where they can be
        joined; one by one if that fails, each error counted at its call's site."""
        if len(members) > 1 and key[0] is not None:
            try:
                return [*self._measure(members)]
            except Exception:  # measured one by one below, where the error is counted
                pass
        out: list[dict[str, Any] | None] = []
        for e in members:
            try:
                out.append(self._measure([e])[0])
            except Exception as err:  # never break the model: report instead
                self.errors[(e.where, f"{e.call.kind}: {type(err).__name__}: {err}")] += 1
                out.append(None)
        return out

    def _measure(self, members: list[Pending]) -> list[dict[str, Any]]:
        """The statistics of calls that ``_group_key`` puts together, one dict per call."""
        first = members[0]
        return grouped_logit_stats(
            _joined([e.call.logits for e in members], None),  # type: ignore[arg-type]
            mask=_joined([e.call.mask for e in members], first.call.logits),
            sink=first.call.sink,  # a call with sink columns is measured alone
            outputs=_joined([e.call.outputs for e in members], None),
            rows=first.rows,
            queries=_queries(first),
            calls=len(members),
            mask_value=self.mask_value,
            saturation=self.saturation,
        )

    def _store(self, entry: Pending, stats: dict[str, Any], spread: dict[str, Any]) -> None:
        """One call's statistics, recorded at its site."""
        call = entry.call
        max_abs_qk, scale = call.max_abs_qk, call.scale
        if max_abs_qk is None and call.dtype == torch.float16 and scale not in (None, 0.0):
            # the logits before the scale, where the scale is applied after the product
            max_abs_qk = float(stats["max_abs_logit"]) / abs(scale)
        s = AttentionStats(
            step=0,
            path=call.path,
            shape=call.shape,
            dtype=str(call.dtype).replace("torch.", ""),
            scale=scale,
            scale_source=call.source,
            scale_fit_residual=call.fit_residual,
            softcap=call.softcap,
            scale_per_head=call.scale_per_head,
            scale_learned=call.scale_learned,
            scale_range=call.scale_range,
            qk_gain_learned=call.qk_gain_learned,
            head_dim=entry.head_dim,
            num_heads=call.num_heads,
            scale_ratio=None
            if scale is None or entry.head_dim is None
            else scale * entry.head_dim**0.5,
            max_abs_qk=max_abs_qk,
            **spread,
            **stats,
            heads=None if isinstance(entry.heads, RowStats) else entry.heads,
            run_step=entry.run_step,
        )
        if entry.grad_norm is not None:
            s.logit_grad_norm = entry.grad_norm
        record = self.records.setdefault((entry.record.where, entry.record.kind), entry.record)
        s.step = len(record.series)
        if self.run is None or self.run.keep(record, s):
            record.series.append(s)
        entry.stats = s

    def _every_row(self, call: Call) -> RowStats | dict[str, list[float | None]] | None:
        """Per-head statistics over every row, with ``all_rows``: a few large operations over
        every logit, on as many threads as the model uses, at once (they read the model's
        tensors, which a later flush would keep alive). Statistics per row wait for their
        reduction per head at the flush (``_per_head``), with other calls'."""
        if not self.all_rows or call.heads is None:
            return None
        with pooled(self.pool):
            found = call.heads()
        return found if isinstance(found, RowStats) else found.to_dict()

    def _per_head(self, pending: list[Pending]) -> None:
        """Reduce the every-row statistics of the calls that wait for it per head, together;
        one by one if that fails, each error counted at its call's site."""
        waiting = [e for e in pending if isinstance(e.heads, RowStats)]
        if not waiting:
            return
        try:
            reduced = per_head_of([e.heads for e in waiting])  # type: ignore[misc]
        except Exception:  # one by one below, where the error is counted
            reduced = []
        for i, e in enumerate(waiting):
            try:
                e.heads = (reduced[i] if reduced else e.heads.per_head()).to_dict()  # type: ignore[union-attr]
            except Exception as err:  # never break the model: report instead
                self.errors[(e.where, f"{e.call.kind}: {type(err).__name__}: {err}")] += 1
                e.heads = None

    def watch_gradient(
        self,
        tensor: torch.Tensor,
        grad_at_softmax_input: Callable[[torch.Tensor], torch.Tensor],
        entry: Pending,
        where: str,
    ) -> None:
        """Fill the call's ``logit_grad_norm`` during backward from the gradient reaching
        ``tensor`` (in its statistics, or for them where they are not measured yet).

        The hook only reads the gradient and returns None, so backward propagates
        exactly the same values.
        """
        if not (self.gradients and tensor.requires_grad):
            return
        rows = self.rows  # backward runs after other calls changed it

        def hook(grad: torch.Tensor) -> None:
            self.rows = rows
            try:
                with self._own_work():
                    norm = float(grad_at_softmax_input(grad.detach()).float().norm())
                if entry.stats is not None:
                    entry.stats.logit_grad_norm = norm
                else:
                    entry.grad_norm = norm
            except Exception as err:  # never break backward: report instead
                self.errors[(where, f"gradient: {type(err).__name__}: {err}")] += 1

        tensor.register_hook(hook)  # type: ignore[no-untyped-call]

    # -- scaled_dot_product_attention -------------------------------------------

    # -- nn.MultiheadAttention and nn.TransformerEncoderLayer ---------------------

    def on_mha(self, module: nn.MultiheadAttention, args: Any, kwargs: Any, output: Any) -> None:
        """Called by the registry after an nn.MultiheadAttention ran."""
        where = self._module_site(module)
        if where is None:
            return
        self._guarded(
            where,
            "multihead_attention",
            lambda: adapters.on_mha(
                self, module, adapters.mha_arguments(module, args, kwargs), output
            ),
        )

    def _module_site(self, module: nn.Module, suffix: str = "") -> str | None:
        """Site name of a module that just returned; None if it is not monitored."""
        if not (self.active and self.measuring):
            return None
        if self.names:
            return self.names.get(id(module))
        names = [type(m).__name__ for m in (*REGISTRY.stack, module)]
        return ".".join(names) + suffix

    def on_fused_encoder_layer(
        self, layer: nn.TransformerEncoderLayer, args: Any, kwargs: Any
    ) -> None:
        """Called after an encoder layer ran as one fused kernel, without its attention module.

        The statistics are recomputed from the layer's input and weights.
        """
        m = layer.self_attn
        where = self.names.get(id(m)) if self.names else self._module_site(layer, ".self_attn")
        if where is None or not (self.active and self.measuring):
            return

        def run() -> Call:
            bound, normed = adapters.fused_encoder_arguments(layer, args, kwargs)
            return adapters.on_mha(
                self, m, bound, None, normed=normed, path="multihead_attention:encoder-fastpath"
            )

        self._guarded(where, "multihead_attention", run)


_NOT_USER_CODE = (str(Path(torch.__file__).parent), str(Path(__file__).parent))


def _from_user_code() -> bool:
    """Whether the torch function running now was called by the model's code, not by
    torch's own: its compiled code's wrappers run torch functions too, and so does a graph
    that runs in Python (its code is generated, named ``<eval_with_key>...``), which must
    not see the calls it keeps read before it has returned."""
    name = sys._getframe(2).f_code.co_filename
    return not name.startswith((*_NOT_USER_CODE, "<eval_with_key>"))


def _is_traced(func: Any) -> bool:
    """Whether compiled code keeps this function's calls (``calls.TRACED``)."""
    try:
        return func in TRACED
    except TypeError:  # an unhashable callable
        return False


def _in_python_graph() -> bool:
    """Whether the code that called the torch function running now, torch's own frames
    skipped, is a graph that runs in Python (its generated code)."""
    frame: Any = sys._getframe(2)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_NOT_USER_CODE):
        frame = frame.f_back
    return bool(frame.f_code.co_filename.startswith("<eval_with_key>"))


def _code_location() -> tuple[tuple[str, int], ...]:
    """Where the attention call running now is in the model's code: the file and line of
    each caller outside torch and the monitor, from the innermost up to the ``forward`` that
    made it (a helper such as a shared ``softmax`` is called from several places)."""
    frame: Any = sys._getframe(1)
    while frame.f_back is not None and frame.f_code.co_filename.startswith(_NOT_USER_CODE):
        frame = frame.f_back
    place = []
    for _ in range(8):
        place.append((frame.f_code.co_filename, frame.f_lineno))
        if frame.f_code.co_name == "forward" or frame.f_back is None:
            break
        frame = frame.f_back
    return tuple(place)


def _storage(t: torch.Tensor) -> int | None:
    """Where a tensor's data lives; None for one without plain storage (sparse, meta, empty,
    a tensor subclass): whatever a model holds, the check must not fail on it."""
    if t.layout != torch.strided or not t.numel() or t.device.type == "meta":
        return None
    try:
        return int(t.untyped_storage().data_ptr())
    except (RuntimeError, NotImplementedError, TypeError, AttributeError):
        return None


def _module_names(root: nn.Module) -> list[tuple[str, nn.Module]]:
    """Each module under ``root`` once, in ``named_modules`` order, with its name: where it is
    registered at several paths, the first whose parts are all public. A wrapper such as
    TransformerLens's bridge holds each module it wraps at a private path
    (``blocks.0._original_component.attn``) and at the one its users know (``blocks.0.attn``)."""
    names: dict[int, tuple[str, nn.Module]] = {}
    stack: list[tuple[str, nn.Module]] = [("", root)]
    while stack:
        path, module = stack.pop()
        known = names.get(id(module))
        if known is not None and (_public(known[0]) or not _public(path)):
            continue
        # new, or a public path for a module known by a private one: its children renamed too
        names[id(module)] = (path, module)
        children = [
            (f"{path}.{n}" if path else n, c) for n, c in module._modules.items() if c is not None
        ]
        stack.extend(reversed(children))
    return list(names.values())


def _public(path: str) -> bool:
    return not any(part.startswith("_") for part in path.split("."))


def _storages(root: nn.Module) -> set[int]:
    """Where the data of ``root``'s parameters and buffers live (one pass over its modules;
    the tensors without plain storage left out, as by ``_storage``)."""
    ptrs = set()
    for m in root.modules():
        for p in (*m._parameters.values(), *m._buffers.values()):
            # a sparse tensor, a subclass without storage: left out
            if p is not None:
                with contextlib.suppress(
                    RuntimeError, NotImplementedError, TypeError, AttributeError
                ):
                    ptrs.add(p.untyped_storage().data_ptr())
    ptrs.discard(0)  # empty and meta tensors: no data anywhere
    return ptrs


_Operands = tuple[
    torch.Tensor,
    torch.Tensor,
    int,
    float,
    torch.Tensor,
    torch.Tensor,
    tuple[int | None, int | None],
]


def _operands(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> _Operands | None:
    """q and k of a product, its head size, its own factor (baddbmm's alpha), and q and k
    laid out as (..., rows, head_dim); None for a product that is not q·kᵀ-like."""
    if func is torch.einsum:
        parsed = einsum_operands(args)
        if parsed is None or len(parsed[1]) != 2:
            return None
        eq, (a, b) = parsed
        if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
            return None
        layout = einsum_layout(eq, a, b)
        if layout is None:
            return None
        a_is_q, head_dim, rows_a, rows_b, (axis_a, axis_b) = layout
        if not a_is_q:
            a, b, rows_a, rows_b, axis_a, axis_b = b, a, rows_b, rows_a, axis_b, axis_a
        return a, b, head_dim, 1.0, rows_a(a), rows_b(b), (axis_a, axis_b)
    first = 1 if func in _BADDBMM else 0
    a = arg(args, kwargs, first, "batch1" if first else "input")
    b = arg(args, kwargs, first + 1, "batch2" if first else "other")
    if b is None and not first:
        b = kwargs.get("mat2")  # bmm's name for it
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return None
    if a.dim() < 2 or b.dim() < 2:
        return None
    factor = value(kwargs.get("alpha", args[4] if len(args) > 4 else 1)) if first else 1.0
    n = max(a.dim(), b.dim())
    return a, b, int(a.shape[-1]), factor, a, b.transpose(-2, -1), (n - 2, n - 1)


def _masked(
    x: torch.Tensor, mask: torch.Tensor | None, sink: torch.Tensor | None, mask_value: float
) -> torch.Tensor:
    """The entries of ``x`` outside the keys: masked (by the mask tensor, or at or below
    ``mask_value`` where there is none) or a sink column, as in the sampled statistics."""
    masked = x <= mask_value if mask is None else mask
    return masked if sink is None else masked | sink


def _group_key(entry: Pending) -> tuple[Any, ...]:
    """Calls measured together: logits of one shape with heads, masks alike, no sink columns,
    outputs of one shape, the same rows; a call that fits no other is a group of its own
    (first item None)."""
    call = entry.call
    if call.logits.dim() < 3 or call.sink is not None:
        return (None, id(entry))
    return (
        tuple(call.logits.shape),
        None if call.mask is None else True,
        None if call.outputs is None else tuple(call.outputs.shape),
        None if entry.rows is None else tuple(entry.rows.tolist()),
        _queries(entry),
    )


def _joined(parts: list[torch.Tensor | None], like: torch.Tensor | None) -> torch.Tensor | None:
    """Per-call tensors joined along the heads axis (masks broadcast to ``like``'s shape)."""
    if parts[0] is None:
        return None
    if len(parts) == 1:
        return parts[0]
    if like is not None and all(p.dim() == 0 and not bool(p) for p in parts):  # type: ignore[union-attr]
        return parts[0]  # no call masked anything: one 0-d False, not a copy per entry
    if like is not None:
        parts = [p.expand(like.shape) for p in parts]  # type: ignore[union-attr]
    return torch.cat(parts, dim=-3)  # type: ignore[arg-type]


def _queries(entry: Pending) -> int | None:
    return entry.call.shape[-2] if len(entry.call.shape) >= 2 else None


def _used_dims(q: torch.Tensor, k: torch.Tensor, head_dim: int) -> int:
    """The head size q·k really sums over: heads zero-padded to a kernel's size (20 to 32)
    add nothing, and the scale they need is that of the dimensions that hold values."""
    if q.shape[-1] != head_dim or k.shape[-1] != head_dim or not q.numel() or not k.numel():
        return head_dim
    # the usual case, settled on a few rows of the first head (views: a transposed q is not
    # copied): padding is zero in all; all() of a float tensor: no zero in it
    if bool(q[(0,) * (q.dim() - 2)][:8].all() & k[(0,) * (k.dim() - 2)][:8].all()):
        return head_dim
    qf, kf = q.reshape(-1, head_dim), k.reshape(-1, head_dim)
    used = (qf != 0).any(0) & (kf != 0).any(0)
    n = int(used.sum())
    return n if 0 < n < head_dim else head_dim


def _by_query(scores: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """Per-edge scores (edges, *heads) as (1, heads, query nodes, keys): each node's edges
    in a row, in their listed order, -inf past the last; nodes without an edge left out."""
    edges = scores.shape[0]
    flat = scores.reshape(edges, -1)
    order = torch.argsort(index, stable=True)
    node = index[order]
    counts = torch.bincount(node)
    starts = torch.cumsum(counts, 0) - counts
    slot = torch.arange(edges, device=scores.device) - starts[node]
    dense = flat.new_full((flat.shape[1], counts.numel(), int(counts.max())), -math.inf)
    dense[:, node, slot] = flat[order].T
    return dense[:, counts > 0].unsqueeze(0)


def _scores_lineage(product: Product, factor: float, prescaled: list[Lineage]) -> Lineage:
    """The lineage a product starts: its own factor times those applied to q and k before
    it, per head too, with what they say of a learned or position-dependent scale."""
    head_factor = None
    for lin in prescaled:
        if lin.head_factor is not None:
            hf = lin.head_factor
            head_factor = hf if head_factor is None else head_factor * hf
    return Lineage(
        product,
        factor * math.prod(lin.factor for lin in prescaled),
        head_factor=head_factor,
        learned=any(lin.learned for lin in prescaled),
        position_factor=position_range(1.0, *prescaled),  # a length temperature on q or k
        gain=any(lin.gain for lin in prescaled),
    )


def _softmax_input(
    func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[torch.Tensor, int] | None:
    """A softmax's input and the axis it normalises (an ``exp``: the last, by hand after it)."""
    x, dim = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "dim")
    if isinstance(dim, (tuple, list)) and len(dim) == 1:  # logsumexp(x, [-1])
        dim = dim[0]
    if func in EXP:  # elementwise: the normalisation over the keys follows by hand
        dim = -1
    if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2:
        return None
    if not isinstance(dim, int) or not -x.dim() <= dim < x.dim():
        return None
    return x, dim % x.dim()


def _keys_placed(
    x: torch.Tensor, dim: int, lin: Lineage | None, out: Any
) -> tuple[torch.Tensor, Any, Lineage | None, tuple[int, int] | None] | None:
    """The softmax input and output with the keys' axis last (the product tells which axis
    the queries run over), the lineage to match, and the axes moved; None for a softmax over
    an axis that is not the keys' (heads, batch)."""
    last = x.dim() - 1
    if lin is None or lin.product is None:
        return (x, out, lin, None) if dim == last else None
    placed = _keys_axis(lin.product, x, dim)
    if placed is None:
        return None
    product, moved = placed
    if moved == (last - 1, last):
        return x, out, replaced(lin, product=product), None
    lin = replaced(lin, product=product, row_shift=None)
    if lin.mask is not None and lin.mask.shape == x.shape:
        lin = replaced(lin, mask=_keys_last(lin.mask, moved))
    return _keys_last(x, moved), _keys_last(out, moved), lin, moved


def _keys_axis(
    product: Product, x: torch.Tensor, dim: int
) -> tuple[Product, tuple[int, int]] | None:
    """The product read so that ``dim``, the softmax's axis, runs over its keys, and the axes
    of queries and keys; None where ``dim`` is neither (a softmax over heads or batch is no
    attention), or is not the last axis of scores laid out otherwise than the product."""
    last = (x.dim() - 2, x.dim() - 1)
    if product.out.shape != x.shape or product.q_axis is None or product.k_axis is None:
        return (product, last) if dim == x.dim() - 1 else None
    if dim == product.q_axis:  # the keys were the first operand
        product = product.swapped()
    if dim != product.k_axis or product.q_axis is None:
        return None
    return product, (product.q_axis, dim)


def _keys_last(t: Any, axes: tuple[int, int] | None) -> Any:
    """``t`` with the query and key axes moved last, as (..., rows, keys)."""
    if axes is None or not isinstance(t, torch.Tensor) or t.dim() < 2:
        return t
    if axes == (t.dim() - 2, t.dim() - 1):
        return t
    return t.movedim(axes, (-2, -1))


def _unshifted(x: torch.Tensor, lin: Lineage | None) -> torch.Tensor:
    """The scores before a per-row shift the code took off them (a stable softmax written by
    hand): the softmax is the same, and the statistics are about the scores."""
    if lin is None or lin.row_shift is None:
        return x
    try:
        return x.detach() + lin.row_shift.to(x.dtype)
    except RuntimeError:  # shapes that no longer line up: the shifted scores
        return x


def _read_scale(lin: Lineage, x: torch.Tensor) -> dict[str, Any]:
    """The scale a traced lineage applied: scalar factors, per-head factors, a soft-cap."""
    factor, softcap = lin.factor, None
    if lin.cap_input is not None:
        factor, softcap = lin.cap_input * lin.factor, lin.factor
    scale, per_head = head_scales(factor, lin.head_factor, x.shape)
    return {
        "scale": scale,
        "source": "traced",
        "softcap": softcap,
        "scale_per_head": per_head,
        "scale_learned": lin.learned,
        "scale_range": position_range(scale, lin),
        "qk_gain_learned": lin.gain,
    }


# the hand-written path: a product starts a lineage, a softmax over one is attention
handles(*PRODUCT, kind="product")(Capture._on_product)
handles(
    *(SOFTMAX | LOG_SOFTMAX | EXP),
    kind="softmax(QK^T)",
    path="softmax",
    fused=False,
    gradients=True,
    all_rows=True,
    what="a softmax (or log_softmax, logsumexp, exp) over q·kᵀ written by hand; the scale "
    "is the product of the factors the lineage met, or fitted where it ended",
)(Capture._on_softmax)
PATHS["softmax:edges"] = calls.Path(
    kind="softmax(QK^T)",
    fused=False,
    gradients=False,
    all_rows=True,
    what="per-edge scores (q_i * k_j).sum(-1) normalised by scatter over each query "
    "node's edges (graph attention), read one row per node",
)
