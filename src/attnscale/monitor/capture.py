r"""Capture: intercept attention computations and turn each into statistics.

Interception is a [torch.overrides.TorchFunctionMode][] (the mechanism of
``torch.utils.flop_counter.FlopCounterMode``), not patched module attributes:
it sees every torch function and ``Tensor`` method however the model bound it
(``torch.softmax``, ``F.softmax(input=...)``, a local alias made before the
block, ``@``, ``einsum`` ...), nests as a stack, and touches no global name,
so nothing is left behind after exit. Module paths come from global module
hooks, which unlike per-module hooks do not switch PyTorch's fast paths off.

Per path:

- ``F.scaled_dot_product_attention``: q, k and the mask are read at the call.
- ``nn.MultiheadAttention`` and ``nn.TransformerEncoderLayer``: while either
  runs, every monitor's mode is taken off the stack, so PyTorch's check for
  an active mode does not switch their fused fast paths off (outputs stay
  bitwise identical). The statistics are recomputed from the module's weights
  and inputs after the call.
- ``torch.compile``: dynamo traces the monitor's hooks and mode as no-ops, so
  compiled code runs as without the monitor; it cannot be seen into, and each
  call into a compiled module is counted so that the report says so.
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
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import inspect
import math
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.overrides import TorchFunctionMode
from torch.utils.weak import WeakIdKeyDictionary

from .report import AttentionRecord, AttentionStats
from .stats import logit_stats, tensor_std

__all__ = ["Capture"]

_TB = torch._C.TensorBase


@dataclasses.dataclass(frozen=True)
class _Product:
    """A product of two activations, q·kᵀ if a softmax follows."""

    out: torch.Tensor  # detached
    q: torch.Tensor  # detached operands
    k: torch.Tensor
    head_dim: int
    max_abs_qk: float | None  # float16 products only: the overflow check needs it


@dataclasses.dataclass(frozen=True)
class _Lineage:
    """How a tensor derives from a product (or, without one, from a scaled tensor)."""

    product: _Product | None
    factor: float = 1.0  # scalar factors met so far
    cap_input: float | None = None  # the factor at a tanh's input (soft-cap)
    mask: torch.Tensor | None = None  # positions a mask tensor masked, shaped like the tensor

    def times(self, s: float) -> _Lineage:
        return dataclasses.replace(self, factor=self.factor * s)


def _is_scalar(x: object) -> bool:
    if isinstance(x, bool):
        return False
    if isinstance(x, (int, float)):
        return True
    return isinstance(x, torch.Tensor) and x.dim() == 0 and x.is_floating_point()


def _value(x: Any) -> float:
    """A scalar's value; a 0-d tensor is detached first (float() of a tensor that requires
    grad warns, and the user's code never asked for that warning)."""
    return float(x.detach()) if isinstance(x, torch.Tensor) else float(x)


def _arg(args: Sequence[Any], kwargs: dict[str, Any], i: int, name: str) -> Any:
    return args[i] if len(args) > i else kwargs.get(name)


def _negative(x: object) -> bool:
    """Whether a fill value is negative (a mask's), for a number or a tensor of them."""
    if isinstance(x, torch.Tensor):
        return x.is_floating_point() and x.numel() > 0 and bool((x < 0).all())
    return isinstance(x, (int, float)) and not isinstance(x, bool) and x < 0


def _rearranged(
    mask: torch.Tensor,
    func: Callable[..., Any],
    args: Sequence[Any],
    kwargs: dict[str, Any],
    out: Any,
) -> torch.Tensor | None:
    """The mask rearranged as ``func`` rearranged the scores; None where that fails."""
    if not isinstance(out, torch.Tensor):
        return None
    if func in _KEEPS_MASK:
        return mask if mask.shape == out.shape else None
    if func in _SPLIT:
        return None
    for m in (mask, mask.contiguous()):  # a broadcast view does not take every view
        try:
            moved = func(m, *args[1:], **kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError):
            continue
        return moved if isinstance(moved, torch.Tensor) and moved.shape == out.shape else None
    return None


# functions whose result is its first argument's values, rearranged or cast
_SAME = {
    getattr(_TB, n)
    for n in (
        "view",
        "reshape",
        "transpose",
        "permute",
        "contiguous",
        "__getitem__",
        "to",
        "float",
        "half",
        "bfloat16",
        "double",
        "type",
        "type_as",
        "clone",
        "detach",
        "unflatten",
        "flatten",
        "squeeze",
        "unsqueeze",
        "expand",
        "repeat",
        "repeat_interleave",
        "t",
        "swapaxes",
        "view_as",
        "reshape_as",
    )
} | {
    torch.transpose,
    torch.permute,
    torch.reshape,
    torch.flatten,
    torch.squeeze,
    torch.unsqueeze,
    torch.repeat_interleave,
    _TB.mT.__get__,  # type: ignore[attr-defined]
    _TB.T.__get__,  # type: ignore[attr-defined]
}
_SPLIT = {_TB.unbind, _TB.split, _TB.chunk, torch.unbind, torch.split, torch.chunk}
_MUL = {torch.mul, _TB.mul, _TB.mul_, torch.multiply, _TB.multiply}
_DIV = {torch.div, _TB.div, _TB.div_, torch.true_divide, _TB.true_divide, torch.divide}
# a tensor added, subtracted or filled in: a mask or a position bias, the scale is unchanged
_PLUS = {torch.add, _TB.add, _TB.add_}
_MINUS = {torch.sub, _TB.sub, _TB.sub_}
_FILL = {_TB.masked_fill, _TB.masked_fill_, torch.masked_fill}
_ADD = _PLUS | _MINUS | _FILL | {torch.where}
_WHERE_ARGS = ("condition", "input", "other")
# rearrangements that leave a same-shaped mask as it is (casts and copies)
_KEEPS_MASK = {
    getattr(_TB, n)
    for n in ("to", "float", "half", "bfloat16", "double", "type", "type_as", "clone", "detach")
} | {_TB.contiguous}
_TANH = {torch.tanh, _TB.tanh, _TB.tanh_, F.tanh}
_PRODUCT = {torch.matmul, _TB.matmul, torch.bmm, _TB.bmm, torch.baddbmm, _TB.baddbmm, torch.einsum}
_SOFTMAX = {torch.softmax, _TB.softmax, F.softmax}
_KIND: dict[Any, str] = {
    **{f: "follow" for f in (*_SAME, *_SPLIT, *_MUL, *_DIV, *_ADD, *_TANH)},
    **{f: "product" for f in _PRODUCT},
    **{f: "softmax" for f in _SOFTMAX},
    F.scaled_dot_product_attention: "sdpa",
}


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
_MHA_SIG = inspect.signature(nn.MultiheadAttention.forward)
_ENCODER_SIG = inspect.signature(nn.TransformerEncoderLayer.forward)


def _einsum_operands(args: tuple[Any, ...]) -> tuple[str, list[Any]] | None:
    if not args or not isinstance(args[0], str):
        return None
    ops = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
    return args[0].replace(" ", ""), ops


def _einsum_layout(eq: str, a: torch.Tensor, b: torch.Tensor) -> tuple[bool, int] | None:
    """(whether a is the query side, head_dim) of a two-operand einsum, if it is q·kᵀ-like."""
    if "->" not in eq or "." in eq:
        return None
    ins, out = eq.split("->")
    parts = ins.split(",")
    if len(parts) != 2 or len(out) < 2:
        return None
    ia, ib = parts
    if len(ia) != a.dim() or len(ib) != b.dim():
        return None
    contracted = [c for c in ia if c in ib and c not in out]
    if not contracted:
        return None
    sizes = dict(zip(ia, a.shape, strict=True))
    head_dim = math.prod(int(sizes[c]) for c in contracted)
    return out[-2] in ia, head_dim


# ---------------------------------------------------------------------------
# the process-wide part: module stack, hooks, and the fast-path suspension
# ---------------------------------------------------------------------------


def _stack_snapshot() -> list[Any]:
    return [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]


def _set_stack(modes: list[Any]) -> None:
    while torch._C._len_torch_function_stack():
        torch._C._pop_torch_function_stack()
    for m in modes:
        torch._C._push_on_torch_function_stack(m)


_COMPILE_HOOK_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"

# modules whose forward checks for an active mode to decide on a fused fast path
_FAST_PATH_MODULES = (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerEncoder)


class _Registry:
    """What all active captures share: global module hooks and the module stack.

    The hooks are installed when the first capture starts and removed when the
    last one stops, in whatever order they stop.
    """

    def __init__(self) -> None:
        self.captures: list[Capture] = []
        self.stack: list[nn.Module] = []
        self.handles: list[Any] = []
        self.suspended: tuple[nn.Module, list[Any]] | None = None
        self.mha_calls: collections.Counter[int] = collections.Counter()
        self.mha_calls_before: dict[int, int] = {}  # per running encoder layer
        self.warning_filter: Any = None

    def add(self, capture: Capture) -> None:
        if not self.captures:
            from torch.nn.modules import module as module_mod

            if not module_mod._has_any_global_hook():
                # torch.compile's wrapper warns about global hooks at every call; these are
                # the monitor's, so the user's code would not have warned
                warnings.filterwarnings("ignore", message=_COMPILE_HOOK_WARNING)
                self.warning_filter = warnings.filters[0]
            self.handles = [
                module_mod.register_module_forward_pre_hook(self.pre_hook),
                module_mod.register_module_forward_hook(
                    self.post_hook, with_kwargs=True, always_call=True
                ),
            ]
        self.captures.append(capture)

    def remove(self, capture: Capture) -> None:
        if capture in self.captures:
            self.captures.remove(capture)
        if not self.captures:
            from torch.nn.modules import module as module_mod

            for h in self.handles:
                h.remove()
                # torch's handle forgets the with_kwargs flag, which alone keeps
                # _has_any_global_hook() true (and torch.compile warning) after removal
                module_mod._global_forward_hooks_with_kwargs.pop(h.id, None)
            self.handles = []
            if self.warning_filter in warnings.filters:
                warnings.filters.remove(self.warning_filter)
                warnings._filters_mutated()  # type: ignore[attr-defined]
            self.warning_filter = None
            self.stack.clear()
            self.mha_calls.clear()
            self.mha_calls_before.clear()
            self.suspended = None

    def pre_hook(self, module: nn.Module, args: object) -> None:
        if torch.compiler.is_compiling():  # traced into a compiled graph: leave no trace
            return
        if module in self.stack:
            # a module does not run inside itself: it is left over from a call that a
            # BaseException (e.g. KeyboardInterrupt) ended, which torch's always-called hooks
            # do not see; drop it and what ran inside it
            del self.stack[self.stack.index(module) :]
        if not self.stack:
            for c in self.captures:
                c.ordinals.clear()
        if isinstance(getattr(module, "_orig_mod", None), nn.Module):  # torch.compile's wrapper
            for c in self.captures:
                c.on_compiled(module)
        self.stack.append(module)
        if isinstance(module, nn.MultiheadAttention):
            self.mha_calls[id(module)] += 1
        elif isinstance(module, nn.TransformerEncoderLayer):
            self.mha_calls_before[id(module)] = self.mha_calls[id(module.self_attn)]
        if isinstance(module, _FAST_PATH_MODULES) and self.suspended is None:
            # take every monitor's mode off the stack while the module runs, so
            # that the fast-path check sees the same modes as without a monitor
            modes = _stack_snapshot()
            _set_stack([m for m in modes if not isinstance(m, Capture)])
            self.suspended = (module, modes)

    def post_hook(self, module: nn.Module, args: Any, *rest: Any) -> None:
        # (kwargs, output) normally; only (output,) when forward raised, since torch
        # calls always-called hooks without kwargs then
        if torch.compiler.is_compiling():
            return
        kwargs, output = rest if len(rest) == 2 else ({}, None)
        if self.stack and self.stack[-1] is module:
            self.stack.pop()
        elif module in self.stack:  # unwinding after an exception
            while self.stack and self.stack.pop() is not module:
                pass
        if self.suspended is not None and self.suspended[0] is module:
            _set_stack(self.suspended[1])
            self.suspended = None
        if output is None:  # the module raised: nothing to measure
            return
        if isinstance(module, nn.MultiheadAttention):
            for c in list(self.captures):
                c.on_mha(module, args, kwargs, output)
        elif isinstance(module, nn.TransformerEncoderLayer):
            before = self.mha_calls_before.pop(id(module), None)
            if before == self.mha_calls[id(module.self_attn)]:
                # the fused fast path ran the layer without calling its attention module
                for c in list(self.captures):
                    c.on_fused_encoder_layer(module, args, kwargs)


_REGISTRY = _Registry()


# ---------------------------------------------------------------------------
# one monitor's capture
# ---------------------------------------------------------------------------


class Capture(TorchFunctionMode):
    """The interception and per-path adapters of one monitor; see the module docs."""

    def __init__(
        self,
        models: Sequence[nn.Module],
        *,
        gradients: bool,
        sample_batch: int,
        max_query_rows: int,
        mask_value: float,
        saturation: float,
    ) -> None:
        super().__init__()
        self.gradients = gradients
        self.sample_batch = sample_batch
        self.max_query_rows = max_query_rows
        self.mask_value = mask_value
        self.saturation = saturation
        self.names: dict[int, str] = {}
        prefix = len(models) > 1
        for i, model in enumerate(models):
            for name, m in model.named_modules():
                full = f"{i}.{name}" if prefix and name else (f"{i}" if prefix else name)
                self.names.setdefault(id(m), full or type(m).__name__)
        self.models = list(models)
        self.records: dict[tuple[str, str], AttentionRecord] = {}
        self.errors: list[tuple[str, str]] = []
        self.ordinals: collections.Counter[tuple[str, str]] = collections.Counter()
        self.unmatched_softmax = 0
        self.compiled: collections.Counter[str] = collections.Counter()  # calls per site
        self.active = False
        self._lineage: WeakIdKeyDictionary = WeakIdKeyDictionary()
        self._recent: collections.deque[_Product] = collections.deque(maxlen=4)
        self._param_ptrs: dict[int, set[int]] = {}

    # -- life cycle -------------------------------------------------------

    def start(self) -> None:
        _REGISTRY.add(self)
        torch._C._push_on_torch_function_stack(self)
        self.active = True

    def stop(self) -> None:
        self.active = False
        # remove this mode wherever it is: monitors may exit in any order
        if _REGISTRY.suspended is not None:
            module, modes = _REGISTRY.suspended
            _REGISTRY.suspended = (module, [m for m in modes if m is not self])
        else:
            _set_stack([m for m in _stack_snapshot() if m is not self])
        _REGISTRY.remove(self)
        self._lineage = WeakIdKeyDictionary()
        self._recent.clear()

    # -- where are we ---------------------------------------------------------

    def where(self) -> str | None:
        """The innermost monitored module running now; None outside the monitored models."""
        stack = _REGISTRY.stack
        if self.names:
            for m in reversed(stack):
                name = self.names.get(id(m))
                if name is not None:
                    return name
            return None
        if not stack:
            return "<top level>"
        return ".".join(type(m).__name__ for m in stack)

    def on_compiled(self, module: nn.Module) -> None:
        """Count a call into a ``torch.compile``d module: its inside runs unseen."""
        if not self.active:
            return
        inner = module._orig_mod
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
        ordinal = 0
        if _REGISTRY.stack:  # calls outside any module all belong to one site per kind
            ordinal = self.ordinals[(where, kind)]
            self.ordinals[(where, kind)] += 1
        key = (where if ordinal == 0 else f"{where}#{ordinal}", kind)
        if key not in self.records:
            self.records[key] = AttentionRecord(where=key[0], kind=kind)
        return self.records[key]

    def _is_parameter(self, t: torch.Tensor) -> bool:
        if isinstance(t, nn.Parameter) or isinstance(t._base, nn.Parameter):
            return True
        roots = self.models or _REGISTRY.stack[:1]
        try:
            ptr = t.untyped_storage().data_ptr()
        except (RuntimeError, NotImplementedError):
            return False
        for root in roots:
            ptrs = self._param_ptrs.get(id(root))
            if ptrs is None:
                ptrs = {
                    p.untyped_storage().data_ptr()
                    for p in (*root.parameters(), *root.buffers())
                    if p.numel() and p.device.type != "meta"
                }
                self._param_ptrs[id(root)] = ptrs
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
        out = func(*args, **kwargs)
        if not self.active or torch.compiler.is_compiling():
            return out
        try:
            kind = _KIND.get(func)
        except TypeError:  # an unhashable callable: nothing the monitor follows
            return out
        if kind is None:
            return out
        if kind == "follow":
            self._follow(func, args, kwargs, out)
            return out
        where = self.where()
        if where is None:  # outside the monitored models
            return out
        if kind == "product":
            self._guarded(where, "product", lambda: self._on_product(func, args, kwargs, out))
        elif kind == "softmax":
            self._guarded(
                where, "softmax(QK^T)", lambda: self._on_softmax(where, args, kwargs, out)
            )
        else:
            self._guarded(where, "sdpa", lambda: self._on_sdpa(where, args, kwargs, out))
        return out

    @staticmethod
    @contextlib.contextmanager
    def _own_work() -> Iterator[None]:
        """Run the monitor's own computations unseen and on one CPU thread.

        Unseen: no mode (this one's or another monitor's) intercepts them.
        Outside autocast: an fp16 autocast around the model must not make the monitor's
        float32 recomputation overflow.
        One thread: the statistics are many small operations on a sampled
        tensor; with several intra-op threads each is a parallel region, and
        on a busy machine every region can stall for a scheduler time slice
        (measured: ~0.4 s per call with 2 threads against ~0.02 s with 1).
        The count is restored before the model continues.
        """
        threads = torch.get_num_threads()
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(torch._C.DisableTorchFunction())
                stack.enter_context(torch.no_grad())
                # The statistics are computed in the dtype the monitor chooses (float32), not
                # in the one an autocast region around the model would pick.
                for device in ("cpu", "cuda") if torch.cuda.is_available() else ("cpu",):
                    stack.enter_context(torch.autocast(device, enabled=False))
                if threads > 1:
                    torch.set_num_threads(1)
                yield
        finally:
            if torch.get_num_threads() != threads:
                torch.set_num_threads(threads)

    def _guarded(self, where: str, kind: str, fn: Callable[[], None]) -> None:
        try:
            with self._own_work():
                fn()
        except Exception as err:  # never break the model: report instead
            self.errors.append((where, f"{kind}: {type(err).__name__}: {err}"))

    # -- lineage --------------------------------------------------------------

    def _lineage_of(self, t: object) -> _Lineage | None:
        found: _Lineage | None = self._lineage.get(t)  # type: ignore[no-untyped-call]
        return found

    def _follow(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> None:
        with torch._C.DisableTorchFunction():
            first = _arg(args, kwargs, 0, "input")
            if func in _MUL or func in _DIV:
                b = _arg(args, kwargs, 1, "other")
                if not isinstance(first, torch.Tensor) or not _is_scalar(b):
                    return  # tensor by tensor (e.g. RoPE): not a scale, the lineage ends
                if not first.is_floating_point() or _arg(args, kwargs, 2, "rounding_mode"):
                    return
                s = _value(b)
                if s == 0 or not math.isfinite(s):
                    return
                base = self._lineage_of(first) or _Lineage(None)
                lin: _Lineage | None = base.times(s if func in _MUL else 1 / s)
            elif func in _ADD:
                # a mask or a bias added to the scores: follow whichever operand is tracked,
                # and record the positions a mask masks
                if kwargs.get("alpha", 1) != 1:
                    return
                operands = [*args, *kwargs.values()]
                tracked = [t for t in operands if isinstance(t, torch.Tensor)]
                lin = next((x for x in map(self._lineage_of, tracked) if x is not None), None)
                if lin is None or not isinstance(out, torch.Tensor):
                    return
                base = next(t for t in tracked if self._lineage_of(t) is lin)
                lin = self._with_mask(lin, self._mask_of(func, args, kwargs, base), out)
            elif not isinstance(first, torch.Tensor):
                return
            else:
                lin = self._lineage_of(first)
                if lin is not None and func in _TANH:
                    if lin.cap_input is not None:
                        return  # a second tanh: not a soft-cap
                    lin = dataclasses.replace(lin, cap_input=lin.factor, factor=1.0)
                elif lin is not None and lin.mask is not None:
                    mask = _rearranged(lin.mask, func, args, kwargs, out)
                    lin = dataclasses.replace(lin, mask=mask)
            if lin is None:
                return
            outs = out if func in _SPLIT and isinstance(out, (tuple, list)) else (out,)
            for o in outs:
                if isinstance(o, torch.Tensor) and o.is_floating_point():
                    self._lineage[o] = lin

    def additive_mask(self, t: torch.Tensor) -> torch.Tensor:
        """Positions an additive tensor masks.

        A tensor of two values, 0 and one negative value (``-inf``, ``finfo.min``, -1e4,
        Swin's -100), masks where it holds the negative one, whatever its size. Any other
        tensor is a bias (ALiBi, relative positions), with a mask folded in where it is at or
        below ``mask_value``.
        """
        low = t.amin() if t.numel() else t.new_zeros(())
        if bool(low < 0) and bool(((t == 0) | (t == low)).all()):
            return t == low
        return t <= self.mask_value

    def _mask_of(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        base: torch.Tensor,
    ) -> torch.Tensor | None:
        """Positions of ``base`` (the tracked scores) that an add, sub, fill or where masks."""
        if func in _FILL:
            mask, value = _arg(args, kwargs, 1, "mask"), _arg(args, kwargs, 2, "value")
            ok = isinstance(mask, torch.Tensor) and mask.dtype == torch.bool
            return mask if ok and _negative(value) else None
        if func is torch.where:
            cond, a, b = (_arg(args, kwargs, i, n) for i, n in enumerate(_WHERE_ARGS))
            if not isinstance(cond, torch.Tensor) or cond.dtype != torch.bool:
                return None
            if a is base and _negative(b):
                return ~cond
            return cond if b is base and _negative(a) else None
        other = next(
            (t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor) and t is not base),
            None,
        )
        if other is None or not other.is_floating_point() or not other.numel():
            return None
        return self.additive_mask(other if func in _PLUS else -other)

    @staticmethod
    def _with_mask(lin: _Lineage, positions: torch.Tensor | None, out: torch.Tensor) -> _Lineage:
        if positions is None and lin.mask is None:
            return lin
        try:
            masks = [
                torch.broadcast_to(m, out.shape) for m in (lin.mask, positions) if m is not None
            ]
        except RuntimeError:  # shapes that do not line up: no mask information
            return dataclasses.replace(lin, mask=None)
        return dataclasses.replace(lin, mask=masks[0] if len(masks) == 1 else masks[0] | masks[1])

    def _on_product(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> None:
        if not isinstance(out, torch.Tensor) or not out.is_floating_point() or out.dim() < 2:
            return
        factor = 1.0
        if func is torch.einsum:
            parsed = _einsum_operands(args)
            if parsed is None or len(parsed[1]) != 2:
                return
            eq, (a, b) = parsed
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                return
            layout = _einsum_layout(eq, a, b)
            if layout is None:
                return
            a_is_q, head_dim = layout
            if not a_is_q:
                a, b = b, a
        else:
            first = 1 if func in (torch.baddbmm, _TB.baddbmm) else 0
            a = _arg(args, kwargs, first, "batch1" if first else "input")
            b = _arg(args, kwargs, first + 1, "batch2" if first else "other")
            if b is None and not first:
                b = kwargs.get("mat2")  # bmm's name for it
            if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
                return
            if a.dim() < 2 or b.dim() < 2:
                return
            head_dim = int(a.shape[-1])
            if first:
                factor = _value(kwargs.get("alpha", args[4] if len(args) > 4 else 1))
        if self._is_parameter(a) or self._is_parameter(b):
            return  # an activation times a parameter: a classifier head, not q·kᵀ
        for t in (a, b):
            lin = self._lineage_of(t)
            if lin is not None and lin.product is None and lin.cap_input is None:
                factor *= lin.factor  # q or k scaled before the product
        max_abs = None
        if out.dtype == torch.float16:
            o = self._sample(out, out.dim() - 2).float()
            max_abs = math.inf if not bool(torch.isfinite(o).all()) else float(o.abs().max())
        product = _Product(
            out=out.detach(), q=a.detach(), k=b.detach(), head_dim=head_dim, max_abs_qk=max_abs
        )
        self._lineage[out] = _Lineage(product, factor)
        self._recent.append(product)

    # -- hand-written attention ----------------------------------------------

    def _on_softmax(
        self, where: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> None:
        x, dim = _arg(args, kwargs, 0, "input"), _arg(args, kwargs, 1, "dim")
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or x.dim() < 2:
            return
        if dim not in (-1, x.dim() - 1):
            return
        lin = self._lineage_of(x)
        softcap = None
        product: _Product | None
        if lin is not None and lin.product is not None:
            product = lin.product
            if lin.cap_input is not None:
                scale: float | None = lin.cap_input * lin.factor
                softcap = lin.factor
            else:
                scale = lin.factor
            source, residual = "traced", None
        else:
            product = next((p for p in reversed(self._recent) if p.out.shape == x.shape), None)
            if product is None:
                self.unmatched_softmax += 1
                return
            scale, residual = self._fit(x, product)
            source = "fitted"
        xs = self._sample(x, x.dim() - 2).float()
        mask = None
        if lin is not None and lin.mask is not None and lin.mask.shape == x.shape:
            mask = self._sample(lin.mask, x.dim() - 2)
        stats = self._add(
            ("softmax(QK^T)", where),
            path="softmax",
            logits=xs,
            mask=mask,
            shape=tuple(x.shape),
            dtype=product.out.dtype,
            head_dim=product.head_dim,
            num_heads=int(x.shape[-3]) if x.dim() >= 4 else None,
            scale=scale,
            source=source,
            q=self._sample(product.q),
            k=self._sample(product.k),
            outputs=self._sample(out, out.dim() - 2) if isinstance(out, torch.Tensor) else None,
            fit_residual=residual,
            softcap=softcap,
            max_abs_qk=product.max_abs_qk,
        )
        self._watch_gradient(x, stats, where, lambda g: self._sample(g, g.dim() - 2))

    def _fit(self, x: torch.Tensor, product: _Product) -> tuple[float | None, float | None]:
        """Least-squares factor c in x ≈ c·product, and its relative residual."""
        xs = self._sample(x, x.dim() - 2).float()
        ps = self._sample(product.out, product.out.dim() - 2).float()
        ok = torch.isfinite(xs) & torch.isfinite(ps) & (xs > self.mask_value)
        xv, pv = xs[ok], ps[ok]
        den = float((pv * pv).sum())
        if den <= 0.0:
            return None, None
        c = float((xv * pv).sum()) / den
        nx = float(xv.norm())
        resid = float((xv - c * pv).norm()) / nx if nx > 0 else 0.0
        return (c if resid < 0.1 else None), resid

    # -- sampling and recording ------------------------------------------------

    def _row_index(self, n: int) -> torch.Tensor:
        step = math.ceil(n / self.max_query_rows) if n > self.max_query_rows else 1
        return torch.arange(0, n, step)

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

    def _add(
        self,
        site: tuple[str, str],
        *,
        path: str,
        logits: torch.Tensor,
        mask: torch.Tensor | None = None,
        shape: tuple[int, ...],
        dtype: torch.dtype,
        head_dim: int | None,
        num_heads: int | None,
        scale: float | None,
        source: str,
        q: torch.Tensor | None,
        k: torch.Tensor | None,
        outputs: torch.Tensor | None = None,
        fit_residual: float | None = None,
        softcap: float | None = None,
        max_abs_qk: float | None = None,
    ) -> AttentionStats:
        stats = logit_stats(
            logits,
            mask=mask,
            mask_value=self.mask_value,
            saturation=self.saturation,
            outputs=outputs,
            rows=self._row_index(shape[-2]) if len(shape) >= 2 else None,
        )
        record = self._site(*site)
        ratio = None if scale is None or head_dim is None else scale * math.sqrt(head_dim)
        if max_abs_qk is None and dtype == torch.float16 and scale not in (None, 0.0):
            # the logits before the scale, where the scale is applied after the product
            max_abs_qk = float(stats["max_abs_logit"]) / abs(scale)
        s = AttentionStats(
            step=len(record.series),
            path=path,
            shape=shape,
            dtype=str(dtype).replace("torch.", ""),
            head_dim=head_dim,
            num_heads=num_heads,
            scale=scale,
            scale_ratio=ratio,
            scale_source=source,
            scale_fit_residual=fit_residual,
            softcap=softcap,
            q_std=tensor_std(q),
            k_std=tensor_std(k),
            max_abs_qk=max_abs_qk,
            **stats,
        )
        record.series.append(s)
        return s

    def _watch_gradient(
        self,
        tensor: torch.Tensor,
        stats: AttentionStats,
        where: str,
        grad_at_softmax_input: Callable[[torch.Tensor], torch.Tensor],
    ) -> None:
        """Fill ``stats.logit_grad_norm`` during backward from the gradient reaching ``tensor``.

        The hook only reads the gradient and returns None, so backward propagates
        exactly the same values.
        """
        if not (self.gradients and tensor.requires_grad):
            return

        def hook(grad: torch.Tensor) -> None:
            try:
                with self._own_work():
                    stats.logit_grad_norm = float(
                        grad_at_softmax_input(grad.detach()).float().norm()
                    )
            except Exception as err:  # never break backward: report instead
                self.errors.append((where, f"gradient: {type(err).__name__}: {err}"))

        tensor.register_hook(hook)  # type: ignore[no-untyped-call]

    # -- scaled_dot_product_attention -------------------------------------------

    def _prescale(self, t: torch.Tensor) -> float:
        lin = self._lineage_of(t)
        if lin is None or lin.product is not None or lin.cap_input is not None:
            return 1.0
        return lin.factor

    def _on_sdpa(self, where: str, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
        b = _SDPA_SIG.bind(*args, **kwargs).arguments
        q, k = b["query"], b["key"]
        mask, causal, scale = b.get("attn_mask"), b.get("is_causal", False), b.get("scale")
        head_dim = int(q.shape[-1])
        c = 1 / math.sqrt(head_dim) if scale is None else _value(scale)
        pre = self._prescale(q) * self._prescale(k)
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
        positions = None
        if mask is not None:
            full = torch.broadcast_to(mask, (*q.shape[:-2], lq, lk))  # (..., q_len, k_len)
            full = self._sample(full)[..., rows, :]
            if full.dtype == torch.bool:
                logits = logits.masked_fill(~full, -math.inf)
            else:
                positions = torch.broadcast_to(self.additive_mask(full), logits.shape)
                logits = logits + full.float()
        max_abs_qk = None
        if q.dtype == torch.float16:
            max_abs_qk = float((qs.float() @ ks.float().transpose(-2, -1)).abs().max())
        stats = self._add(
            ("sdpa", where),
            path="sdpa",
            logits=logits,
            mask=positions,
            shape=tuple(q.shape),
            dtype=q.dtype,
            head_dim=head_dim,
            num_heads=int(q.shape[-3]) if q.dim() >= 4 else None,
            scale=c * pre,
            source="sdpa-default" if scale is None else "sdpa-argument",
            q=qs,
            k=ks,
            outputs=self._sample(out, out.dim() - 2) if isinstance(out, torch.Tensor) else None,
            max_abs_qk=max_abs_qk,
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
                return _softmax_backward(logits, g @ vs.float().transpose(-2, -1))

            self._watch_gradient(out, stats, where, grad_at_logits)

    # -- nn.MultiheadAttention and nn.TransformerEncoderLayer ---------------------

    def on_mha(self, module: nn.MultiheadAttention, args: Any, kwargs: Any, output: Any) -> None:
        """Called by the registry after an nn.MultiheadAttention ran."""
        where = self._module_site(module)
        if where is None:
            return
        self._guarded(
            where,
            "multihead_attention",
            lambda: self._on_mha(
                module, _MHA_SIG.bind(module, *args, **kwargs).arguments, where, output
            ),
        )

    def _module_site(self, module: nn.Module, suffix: str = "") -> str | None:
        """Site name of a module that just returned; None if it is not monitored."""
        if not self.active:
            return None
        if self.names:
            return self.names.get(id(module))
        names = [type(m).__name__ for m in (*_REGISTRY.stack, module)]
        return ".".join(names) + suffix

    def on_fused_encoder_layer(
        self, layer: nn.TransformerEncoderLayer, args: Any, kwargs: Any
    ) -> None:
        """Called after an encoder layer ran as one fused kernel, without its attention module.

        The statistics are recomputed from the layer's input and weights.
        """
        m = layer.self_attn
        where = self.names.get(id(m)) if self.names else self._module_site(layer, ".self_attn")
        if where is None or not self.active:
            return

        def run() -> None:
            a = _ENCODER_SIG.bind(layer, *args, **kwargs).arguments
            src = a["src"]
            mask = a.get("src_mask")
            if mask is None and a.get("is_causal", False):
                n = src.shape[-2]
                mask = torch.ones(n, n, dtype=torch.bool, device=src.device).triu(1)
            norm = layer.norm1
            normed = (
                (lambda t: F.layer_norm(t, norm.normalized_shape, norm.weight, norm.bias, norm.eps))
                if layer.norm_first
                else None
            )
            bound = {
                "query": src,
                "key": src,
                "attn_mask": mask,
                "key_padding_mask": a.get("src_key_padding_mask"),
                "is_causal": False,
            }
            self._on_mha(
                m, bound, where, None, normed=normed, path="multihead_attention:encoder-fastpath"
            )

        self._guarded(where, "multihead_attention", run)

    def _on_mha(
        self,
        m: nn.MultiheadAttention,
        a: dict[str, Any],
        where: str,
        output: Any,
        *,
        normed: Callable[[torch.Tensor], torch.Tensor] | None = None,
        path: str = "multihead_attention",
    ) -> None:
        query, key, value = a["query"], a["key"], a.get("value", a["key"])
        attn_mask, kpm = a.get("attn_mask"), a.get("key_padding_mask")
        is_causal = a.get("is_causal", False)
        lengths: list[int] | None = None
        if query.is_nested:
            lengths = [int(t.shape[0]) for t in query.unbind()]
            query = query.to_padded_tensor(0.0)
            key = value = query if a["key"] is a["query"] else key.to_padded_tensor(0.0)
        if normed is not None:
            query = key = value = normed(query)
        batched = query.dim() == 3
        if not batched:  # (L, E) -> (L, 1, E)
            query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
            if kpm is not None:
                kpm = kpm.unsqueeze(0)
        elif m.batch_first or normed is not None or lengths is not None:  # (B, L, E) -> (L, B, E)
            query, key, value = query.transpose(0, 1), key.transpose(0, 1), value.transpose(0, 1)
        lq, bsz, e = query.shape
        nb = min(bsz, self.sample_batch)
        query, key, value = query[:, :nb], key[:, :nb], value[:, :nb]  # (L, nb, E)
        h = m.num_heads
        d = e // h
        if m._qkv_same_embed_dim:
            wq, wk, wv = m.in_proj_weight.chunk(3)
        else:
            wq, wk, wv = m.q_proj_weight, m.k_proj_weight, m.v_proj_weight
        bq = bk = bv = None
        if m.in_proj_bias is not None:
            bq, bk, bv = m.in_proj_bias.chunk(3)
        rows = self._row_index(lq).to(query.device)

        def project(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
            return F.linear(x.float(), w.float(), None if bias is None else bias.float())

        q = project(query[rows], wq, bq)  # only the sampled query rows
        k = project(key, wk, bk)
        if m.bias_k is not None:
            k = torch.cat([k, m.bias_k.float().expand(1, nb, e)])
        if m.add_zero_attn:
            k = torch.cat([k, k.new_zeros(1, nb, e)])
        lk = k.shape[0]
        q = q.reshape(len(rows), nb, h, d).permute(1, 2, 0, 3)  # (nb, heads, rows, d)
        k = k.reshape(lk, nb, h, d).permute(1, 2, 0, 3)  # (nb, heads, k_len, d)
        c = 1 / math.sqrt(d)
        qk = q @ k.transpose(-2, -1)  # (nb, heads, rows, k_len)
        logits = qk * c
        if attn_mask is None and is_causal:
            allowed = torch.ones(lq, lk, dtype=torch.bool, device=logits.device).tril()[rows]
            logits = logits.masked_fill(~allowed, -math.inf)
        positions = None
        for mask, shape in ((attn_mask, None), (kpm, (nb, 1, 1, -1))):
            if mask is None:
                continue
            mk = mask
            if shape is not None:  # key padding: (B, S) -> (nb, 1, 1, S)
                mk = mk[:nb].reshape(shape)
            else:
                if mk.dim() == 3:  # (batch * heads, L, S) -> (batch, heads, L, S)
                    mk = mk.reshape(bsz, h, *mk.shape[-2:])[:nb]
                mk = mk[..., rows, :]
            pad = lk - mk.shape[-1]
            if pad:
                mk = F.pad(mk, (0, pad), value=False if mk.dtype == torch.bool else 0.0)
            if mk.dtype == torch.bool:
                logits = logits.masked_fill(mk, -math.inf)
            else:
                logits = logits + mk.float()
                p = torch.broadcast_to(self.additive_mask(mk), logits.shape)
                positions = p if positions is None else positions | p
        outputs = None
        if lengths is not None:
            dev = logits.device
            lens = torch.tensor(lengths[:nb], device=dev)[:, None]  # (nb, 1)
            keep = torch.arange(lk, device=dev)[None, :] < lens  # (nb, S)
            logits = logits.masked_fill(~keep[:, None, None, :], -math.inf)
            q_keep = rows[None, :] < lens  # (nb, rows)
            logits = logits.masked_fill(~q_keep[:, None, :, None], -math.inf)
            # the nested tensor has no padding rows: the padded output the layer returns is 0
            weights = torch.softmax(logits, dim=-1)
            outputs = weights.masked_fill(~q_keep[:, None, :, None], 0.0)
        dtype = a["query"].dtype
        stats = self._add(
            ("multihead_attention", where),
            path=path,
            logits=logits,
            mask=positions,
            shape=(bsz, h, lq, d),
            dtype=dtype,
            head_dim=d,
            num_heads=h,
            scale=c,
            source="multihead_attention",
            q=q,
            k=k,
            outputs=outputs,
            max_abs_qk=float(qk.abs().max()) if dtype == torch.float16 else None,
        )
        out = output[0] if isinstance(output, tuple) else None
        dropout = m.dropout if m.training else 0.0
        if not isinstance(out, torch.Tensor) or dropout > 0 or lengths is not None:
            return  # with dropout on the weights the mask is unknown: no gradient
        v = project(value, wv, bv)
        if m.bias_v is not None:
            v = torch.cat([v, m.bias_v.float().expand(1, nb, e)])
        if m.add_zero_attn:
            v = torch.cat([v, v.new_zeros(1, nb, e)])
        v = v.reshape(lk, nb, h, d).permute(1, 2, 0, 3)  # (nb, heads, k_len, d)
        w_out = m.out_proj.weight.detach().float()
        seq_first = batched and not m.batch_first

        def grad_at_logits(g: torch.Tensor) -> torch.Tensor:
            # the output is out_proj(concat of heads): pull dO back through out_proj
            g = g.float() if batched else g.float().unsqueeze(1)
            g = g if seq_first or not batched else g.transpose(0, 1)  # (L, B, E)
            g = g[rows, :nb] @ w_out  # (rows, nb, E)
            g = g.reshape(len(rows), nb, h, d).permute(1, 2, 0, 3)  # (nb, heads, rows, d)
            return _softmax_backward(logits, g @ v.transpose(-2, -1))

        self._watch_gradient(out, stats, where, grad_at_logits)


def _softmax_backward(logits: torch.Tensor, dp: torch.Tensor) -> torch.Tensor:
    """dS = P * (dP - rowsum(dP * P)) for P = softmax(S): the gradient at the logits."""
    p = torch.softmax(logits, dim=-1).nan_to_num(0.0)  # (..., rows, k_len)
    return p * (dp - (dp * p).sum(-1, keepdim=True))
