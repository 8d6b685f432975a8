"""Lineage: how a tensor on its way to a softmax derives from a q·kᵀ product.

A product of two activations starts a lineage. Each torch function in
[FOLLOWED][] that the lineage meets carries it to its result, with what the
function did: a scalar factor (the scale), a ``tanh`` (a soft-cap), a mask
(which positions it masked, from the mask tensor, whatever value it used), or a
rearrangement (views, casts, copies, which move the mask positions with the
values). Any other function ends the lineage.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
import weakref
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import torch
from torch.nn import functional as F

__all__ = ["EXP", "FOLLOWED", "LOG_SOFTMAX", "PRODUCT", "SOFTMAX", "Lineage", "Lineages", "Product"]

_TB = torch._C.TensorBase
_D = TypeVar("_D")

# functions whose result is its first argument's values, rearranged or cast
SAME = {
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
        "gather",
        "index_select",
        "take_along_dim",
    )
} | {
    torch.transpose,
    torch.permute,
    torch.reshape,
    torch.flatten,
    torch.squeeze,
    torch.unsqueeze,
    torch.repeat_interleave,
    torch.gather,  # values picked by an index (Reformer's buckets): the factor stays
    torch.index_select,
    torch.take_along_dim,
    _TB.mT.__get__,  # type: ignore[attr-defined]
    _TB.T.__get__,  # type: ignore[attr-defined]
}
# ... of which these leave a same-shaped mask as it is (casts and copies)
KEEPS_MASK = {
    getattr(_TB, n)
    for n in ("to", "float", "half", "bfloat16", "double", "type", "type_as", "clone", "detach")
} | {_TB.contiguous}
SPLIT = {_TB.unbind, _TB.split, _TB.chunk, torch.unbind, torch.split, torch.chunk}
MUL = {torch.mul, _TB.mul, _TB.mul_, torch.multiply, _TB.multiply}
DIV = {torch.div, _TB.div, _TB.div_, torch.true_divide, _TB.true_divide, torch.divide}
# a tensor added, subtracted or filled in: a mask or a position bias, the scale is unchanged
PLUS = {torch.add, _TB.add, _TB.add_}
MINUS = {torch.sub, _TB.sub, _TB.sub_}
FILL = {_TB.masked_fill, _TB.masked_fill_, torch.masked_fill}
ADD = PLUS | MINUS | FILL | {torch.where}
TANH = {torch.tanh, _TB.tanh, _TB.tanh_, F.tanh}
# a mean or sum of a scaled q or k (landmarks) keeps the factor
REDUCE = {torch.mean, _TB.mean, torch.sum, _TB.sum}
# scores joined with other columns (attention sinks) or blocks (banded attention)
CAT = {torch.cat, torch.concat, torch.concatenate}
# q or k, or scores, stacked along a new axis (ProphetNet's predict streams)
STACK = {torch.stack}
# scores written into a buffer (sliding windows): the buffer takes their lineage
WRITE = {_TB.__setitem__, _TB.copy_, _TB.index_put_, torch.index_put}
# a per-node value spread to edges (graph attention's softmax): the index groups the edges
GATHER = {torch.index_select, _TB.index_select, torch.repeat_interleave, _TB.repeat_interleave}
# functions with a rule of their own; the others carry their first argument's lineage
_OWN_RULE = frozenset(GATHER | WRITE | MUL | DIV | ADD | CAT | STACK)
#: Every function a lineage follows.
FOLLOWED = frozenset(SAME | SPLIT | MUL | DIV | ADD | TANH | REDUCE | CAT | STACK | WRITE)
#: Products of two tensors: q·kᵀ when both are activations.
PRODUCT = frozenset(
    {torch.matmul, _TB.matmul, torch.bmm, _TB.bmm, torch.baddbmm, _TB.baddbmm, torch.einsum}
)
#: Softmax spellings.
SOFTMAX = frozenset({torch.softmax, _TB.softmax, F.softmax})
#: A softmax written out: ``exp`` of the scores, normalised by hand afterwards.
EXP = frozenset({torch.exp, _TB.exp})
#: A softmax written through its logarithm: ``log_softmax``, or ``exp(x - logsumexp(x))``.
LOG_SOFTMAX = frozenset(
    {torch.log_softmax, _TB.log_softmax, F.log_softmax, torch.logsumexp, _TB.logsumexp}
)
_WHERE_ARGS = ("condition", "input", "other")


@dataclasses.dataclass(frozen=True)
class Product:
    """A product of two activations, q·kᵀ if a softmax follows."""

    out: torch.Tensor  # detached
    q: torch.Tensor  # detached operands
    k: torch.Tensor
    head_dim: int
    max_abs_qk: float | None  # float16 products only: the overflow check needs it
    # q and k as (..., rows, head_dim), and the factors applied to them before the product;
    # sampled and divided only where a softmax makes the product attention
    q_rows: torch.Tensor | None = None
    k_rows: torch.Tensor | None = None
    q_prescale: float = 1.0
    k_prescale: float = 1.0
    # the axes of ``out`` that run over the queries and over the keys (einsum may put them
    # anywhere: Transformer-XL's [i, j, batch, heads]); None where the product does not say
    q_axis: int | None = None
    k_axis: int | None = None
    # scores listed per (query, key) pair along the first axis, as graph attention lists
    # them per edge: ``(q_i * k_j).sum(-1)``; the softmax groups them by the query's index
    edges: bool = False

    def swapped(self) -> Product:
        """The same product read the other way round: q is k's side."""
        return replaced(
            self,
            q=self.k,
            k=self.q,
            q_rows=self.k_rows,
            k_rows=self.q_rows,
            q_prescale=self.k_prescale,
            k_prescale=self.q_prescale,
            q_axis=self.k_axis,
            k_axis=self.q_axis,
        )


@dataclasses.dataclass(frozen=True)
class Lineage:
    """How a tensor derives from a product (or, without one, from a scaled tensor)."""

    product: Product | None
    factor: float = 1.0  # scalar factors met so far
    cap_input: float | None = None  # the factor at a tanh's input (soft-cap)
    mask: torch.Tensor | None = None  # positions a mask tensor masked, shaped like the tensor
    # factors that differ per head (or batch element): shape (..., 1, 1), times ``factor``
    head_factor: torch.Tensor | None = None
    learned: bool = False  # a factor met so far is computed from a parameter (a temperature)
    sink: torch.Tensor | None = None  # (k_len,) bool: key columns joined in as attention sinks
    # a per-row constant taken off the scores (``s - s.amax(-1, keepdim=True)``, a stable
    # softmax by hand): the softmax is the same, the statistics read ``scores + row_shift``
    row_shift: torch.Tensor | None = None
    # a factor that changes with the position, not the head (a length temperature: Llama 4's
    # attn_temperature_tuning), folded into ``factor`` as its geometric mean: its smallest and
    # largest value relative to that mean
    position_factor: tuple[float, float] | None = None
    # q or k multiplied by learned per-dimension gains (x-transformers' qk_norm_dim_scale)
    gain: bool = False
    # two activations multiplied elementwise: q·k per pair once summed over the last axis
    pair: tuple[torch.Tensor, torch.Tensor] | None = None
    # per-pair scores (``Product.edges``): the query index of each pair, once a shift by a
    # per-query maximum gathered with it showed the grouping
    groups: torch.Tensor | None = None

    def times(self, s: float) -> Lineage:
        return replaced(self, factor=self.factor * s)


def replaced(obj: _D, /, **changes: Any) -> _D:
    """``dataclasses.replace`` for the dataclasses here (frozen, no ``__post_init__``): a copy
    of the instance's fields with ``changes``, several times faster; the monitor makes one at
    most steps of a lineage."""
    fields = obj.__dict__
    if not changes.keys() <= fields.keys():
        raise TypeError(
            f"{type(obj).__name__} has no field {sorted(changes.keys() - fields.keys())}"
        )
    new = object.__new__(type(obj))
    new.__dict__.update(fields, **changes)
    return new


def is_scalar(x: object) -> bool:
    """A number: Python's, NumPy's (``np.sqrt(head_size)`` is a ``np.float64``, and a
    ``np.float32`` is no ``float``), or a 0-d floating tensor."""
    if isinstance(x, bool) or type(x).__name__ == "bool_":
        return False
    if isinstance(x, numbers.Real):
        return True
    return isinstance(x, torch.Tensor) and x.dim() == 0 and x.is_floating_point()


def value(x: Any) -> float:
    """A scalar's value; a 0-d tensor is detached first (float() of a tensor that requires
    grad warns, and the user's code never asked for that warning)."""
    return float(x.detach()) if isinstance(x, torch.Tensor) else float(x)


def arg(args: Sequence[Any], kwargs: dict[str, Any], i: int, name: str) -> Any:
    """Argument ``i`` of a call, passed by position or as ``name``."""
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
    if func in KEEPS_MASK:
        return mask if mask.shape == out.shape else None
    if func in SPLIT:
        return None
    for m in (mask, mask.contiguous()):  # a broadcast view does not take every view
        try:
            moved = func(m, *args[1:], **kwargs)
        except (RuntimeError, TypeError, ValueError, IndexError):
            continue
        return moved if isinstance(moved, torch.Tensor) and moved.shape == out.shape else None
    return None


def _per_head(b: object, x: torch.Tensor) -> torch.Tensor | None:
    """A multiplier tensor constant over the last two axes (per head, per batch element)."""
    if not isinstance(b, torch.Tensor) or not b.is_floating_point() or b.dim() < 2:
        return None
    if b.shape[-2:] != (1, 1) or b.dim() > x.dim():
        return None
    try:
        torch.broadcast_shapes(b.shape, x.shape)  # type: ignore[no-untyped-call]
    except RuntimeError:
        return None
    return b.detach()


def _rotation_table(b: object, x: torch.Tensor) -> bool:
    """Whether ``b`` looks like RoPE's cos or sin table for ``x``: a constant tensor (no
    gradient) with values in [-1, 1] that varies along the feature axis."""
    if not isinstance(b, torch.Tensor) or not b.is_floating_point() or b.requires_grad:
        return False
    if b.dim() == 0 or x.dim() == 0 or b.shape[-1] != x.shape[-1] or b.numel() < 2:
        return False
    flat = b.detach().reshape(-1)
    probe = flat[:: max(1, flat.numel() // 4096)]  # most tensors fail on a strided subset
    return bool((probe.abs() <= 1).all()) and bool((flat.abs() <= 1).all())


def _folded(lin: Lineage, head_factor: torch.Tensor) -> Lineage:
    """``lin`` with a multiplier that turned out not to be per head folded into its factor
    (geometric mean); where it varies, its range is kept as a per-position factor."""
    g = mean_factor(head_factor)
    sizes = head_factor.detach().abs().float()
    low, high = float(sizes.min()) / g, float(sizes.max()) / g
    varies = high > low * (1 + 1e-6)
    return replaced(
        lin,
        factor=lin.factor * g,
        head_factor=None,
        position_factor=(low, high) if varies else lin.position_factor,
    )


def _pair(a: object, b: object) -> bool:
    """Two activations of one shape, multiplied elementwise: q_i * k_j of per-edge attention."""
    if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)):
        return False
    if a.shape != b.shape or a.dim() < 2 or not (a.is_floating_point() and b.is_floating_point()):
        return False
    return not (isinstance(a, torch.nn.Parameter) or isinstance(b, torch.nn.Parameter))


def _pair_product(
    lin: Lineage, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> Lineage | None:
    """``(q_i * k_j).sum(-1)``: per-edge scores, a product whose rows are grouped later."""
    dim = arg(args, kwargs, 1, "dim")
    assert lin.pair is not None
    q, k = lin.pair
    if func not in (torch.sum, _TB.sum) or not isinstance(out, torch.Tensor):
        return None
    if dim not in (-1, q.dim() - 1, (-1,), [-1]) or kwargs.get("keepdim") or out.dim() < 1:
        return None
    d = int(q.shape[-1])
    product = Product(
        out=out.detach(),
        q=q,
        k=k,
        head_dim=d,
        max_abs_qk=None,
        q_rows=q.reshape(-1, d),
        k_rows=k.reshape(-1, d),
        edges=True,
    )
    return Lineage(product, lin.factor, learned=lin.learned)


def _learned_gain(b: object, x: torch.Tensor) -> bool:
    """Whether ``b`` is a learned gain per feature of ``x``: a tensor with a gradient, one
    value per dimension of the last axis, the same for every row."""
    if not isinstance(b, torch.Tensor) or not b.requires_grad or not b.is_floating_point():
        return False
    if b.dim() == 0 or b.shape[-1] != x.shape[-1] or b.dim() > x.dim():
        return False
    return b.dim() == 1 or b.shape[-2] == 1


def _zero_one_mask(b: object) -> torch.Tensor | None:
    """Where a tensor of zeros and ones is 0 (the positions it masks), None for any other."""
    if not isinstance(b, torch.Tensor) or b.dim() < 2 or not b.numel():
        return None
    if b.dtype == torch.bool:
        return ~b
    if not bool(((b == 0) | (b == 1)).all()):
        return None
    return b == 0


def mean_factor(head_factor: torch.Tensor) -> float:
    """The geometric mean of per-head factors' sizes, for where the heads cannot be told apart."""
    return float(head_factor.abs().float().log().mean().exp())


def _with_mask(lin: Lineage, positions: torch.Tensor | None, out: torch.Tensor) -> Lineage:
    """``lin`` carried to ``out``, with ``positions`` added to what it masked."""
    if positions is None and lin.mask is None:
        return lin
    try:
        masks = [torch.broadcast_to(m, out.shape) for m in (lin.mask, positions) if m is not None]
    except RuntimeError:  # shapes that do not line up: no mask information
        return replaced(lin, mask=None)
    return replaced(lin, mask=masks[0] if len(masks) == 1 else masks[0] | masks[1])


def _other_operand(
    args: tuple[Any, ...], kwargs: dict[str, Any], base: torch.Tensor
) -> torch.Tensor | None:
    """The first tensor argument of a binary operation on ``base`` that is not ``base``."""
    return next(
        (t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor) and t is not base),
        None,
    )


def _row_shift(
    func: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    base: torch.Tensor,
    lin: Lineage,
) -> Lineage | None:
    """``lin`` with a per-row constant added to or taken off ``base`` (one value per query
    row, broadcast over the keys) recorded as a shift; None for anything else."""
    if func not in PLUS and func not in MINUS:
        return None
    other = _other_operand(args, kwargs, base)
    first = arg(args, kwargs, 0, "input")
    if other is None or first is not base or base.dim() < 2 or base.shape[-1] < 2:
        return None
    if other.dim() < 2 or other.shape[-1] != 1 or other.shape[-2] != base.shape[-2]:
        return None
    taken = other.detach() if func in MINUS else -other.detach()
    total = taken if lin.row_shift is None else lin.row_shift + taken
    return replaced(lin, row_shift=total)


class TensorMap:
    """Values keyed by a tensor's identity, each forgotten when its tensor is freed. As
    ``torch.utils.weak.WeakIdKeyDictionary``, whose every lookup builds a weak reference in
    Python: here a lookup is one dict access, and the monitor makes hundreds per forward."""

    __slots__ = ("__weakref__", "_data")

    def __init__(self) -> None:
        self._data: dict[int, tuple[weakref.ref[Any], Any]] = {}

    def get(self, t: object) -> Any:
        entry = self._data.get(id(t))
        return entry[1] if entry is not None and entry[0]() is t else None

    def __setitem__(self, t: torch.Tensor, value: Any) -> None:
        key, owner = id(t), weakref.ref(self)  # weak: no cycle through the callback

        def forget(ref: weakref.ref[Any]) -> None:
            this = owner()
            if this is not None and this._data.get(key, (None,))[0] is ref:
                del this._data[key]

        self._data[key] = (weakref.ref(t, forget), value)


class Lineages:
    """The lineage of every tracked tensor of one monitor (weakly keyed by the tensor)."""

    def __init__(self, mask_value: float) -> None:
        self.mask_value = mask_value
        self.clear()

    def of(self, t: object) -> Lineage | None:
        found: Lineage | None = self._of.get(t)
        return found

    def set(self, t: torch.Tensor, lin: Lineage) -> None:
        self._of[t] = lin

    def clear(self) -> None:
        self._of = TensorMap()
        # what a pass over a mask or a RoPE table found, by tensor and version: one causal
        # mask or table is typically met once per layer
        self._seen = TensorMap()
        self._gathered = TensorMap()  # tensor -> its index

    def _once(self, t: torch.Tensor, what: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, remembered for this version of ``t``."""
        key = (what, t._version)
        found = self._seen.get(t)
        if found is None or found[0] != key:
            found = (key, compute())
            self._seen[t] = found
        return found[1]

    def prescale(self, t: torch.Tensor) -> float:
        """The scalar factor applied to ``t`` (q or k) before it entered a product."""
        lin = self.of(t)
        if lin is None or lin.product is not None or lin.cap_input is not None:
            return 1.0
        return lin.factor

    def prescaled(self, t: torch.Tensor) -> Lineage:
        """The factors applied to ``t`` (q or k) before it entered a product, per head too."""
        lin = self.of(t)
        if lin is None or lin.product is not None or lin.cap_input is not None:
            return Lineage(None)
        return lin

    def follow(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> None:
        """Carry the lineage of ``func``'s tracked input to ``out``, if it has one."""
        if func not in _OWN_RULE and self._of.get(arg(args, kwargs, 0, "input")) is None:
            return  # a view or cast of an untracked tensor, the most common case by far
        with torch._C.DisableTorchFunction():
            if func in GATHER:
                self._remember_gather(func, args, kwargs, out)
            if func in WRITE:
                self._written(func, args, kwargs)
                return
            if func in MUL or func in DIV:
                lin = self._scaled(func, args, kwargs, out)
            elif func in ADD:
                lin = self._added(func, args, kwargs, out)
            elif func in CAT:
                lin = self._joined(args, kwargs, out)
            elif func in STACK:
                lin = self._stacked(args, kwargs)
            else:
                lin = self._moved(func, args, kwargs, out)
            if lin is None:
                return
            outs = out if func in SPLIT and isinstance(out, (tuple, list)) else (out,)
            for o in outs:
                if isinstance(o, torch.Tensor) and o.is_floating_point():
                    self._of[o] = lin

    def _remember_gather(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> None:
        """Which index a tensor was gathered with along its first axis (one value per query
        node, spread to that node's edges): the grouping of per-edge scores."""
        if not isinstance(out, torch.Tensor):
            return
        if func in (torch.index_select, _TB.index_select):
            dim, index = arg(args, kwargs, 1, "dim"), arg(args, kwargs, 2, "index")
        else:  # repeat_interleave(counts, dim=0): node i's value repeated counts[i] times
            counts, dim = arg(args, kwargs, 1, "repeats"), arg(args, kwargs, 2, "dim")
            if not isinstance(counts, torch.Tensor) or counts.dim() != 1:
                return
            index = torch.arange(counts.numel(), device=counts.device).repeat_interleave(counts)
        if dim == 0 and isinstance(index, torch.Tensor) and index.dim() == 1:
            self._gathered[out] = index

    def _scaled(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> Lineage | None:
        first, b = arg(args, kwargs, 0, "input"), arg(args, kwargs, 1, "other")
        if func in MUL and is_scalar(first) and isinstance(b, torch.Tensor) and b.dim():
            first, b = b, first  # scale * q: the factor comes first
        if not isinstance(first, torch.Tensor) or not first.is_floating_point():
            return None
        if arg(args, kwargs, 2, "rounding_mode"):
            return None
        base = self.of(first) or Lineage(None)
        learned = base.learned or (isinstance(b, torch.Tensor) and b.requires_grad)
        if is_scalar(b):
            s = value(b)
            if s == 0 or not math.isfinite(s):
                return None
            lin = base.times(s if func in MUL else 1 / s)
            return replaced(lin, learned=learned)
        per_head = _per_head(b, first)
        if per_head is None and func in MUL and _pair(first, b):
            la, lb = self.of(first) or Lineage(None), self.of(b) or Lineage(None)
            if la.product is None and lb.product is None:  # q_i * k_j, to be summed
                pair = (first.detach(), b.detach())
                return Lineage(None, la.factor * lb.factor, pair=pair)
        learned_gain = per_head is None and func in MUL and _learned_gain(b, first)
        if learned_gain and base.product is None:  # q or k times learned per-dimension gains
            return replaced(base, gain=True)
        if per_head is None:
            # RoPE's cos or sin: a scale applied before it stays (only a tracked q or k is
            # worth the check's pass over the table)
            tracked = self.of(first)
            if tracked is not None and tracked.product is not None and func in MUL:
                # scores times a 0/1 tensor: a multiplicative mask (GPT-2's original
                # ``w * b - 1e10 * (1 - b)``), which zeroes the positions it masks
                zeros = self._once(b, "0/1 mask", lambda: _zero_one_mask(b))
                ok = zeros is not None and isinstance(out, torch.Tensor)
                return _with_mask(tracked, zeros, out) if ok else None
            rope = tracked is not None and tracked.product is None and func in MUL
            if rope and self._once(b, f"rope {first.shape[-1]}", lambda: _rotation_table(b, first)):
                return tracked
            return None  # tensor by tensor: not a scale, the lineage ends
        per_head = per_head if func in MUL else 1 / per_head
        if base.head_factor is not None:
            per_head = base.head_factor * per_head
        return replaced(base, head_factor=per_head, learned=learned)

    def _added(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> Lineage | None:
        # a mask or a bias added to the scores: follow whichever operand is tracked, and
        # record the positions a mask masks
        if kwargs.get("alpha", 1) != 1 or not isinstance(out, torch.Tensor):
            return None
        tensors = [t for t in (*args, *kwargs.values()) if isinstance(t, torch.Tensor)]
        base = next((t for t in tensors if self.of(t) is not None), None)
        if base is None:
            return None
        lin = self.of(base)
        assert lin is not None
        if lin.product is None:  # q or k on its way to a product (RoPE's sum): no mask yet
            return lin
        shifted = _row_shift(func, args, kwargs, base, lin)
        if shifted is not None:
            return shifted
        if lin.product.edges:  # per-edge scores minus each query node's maximum
            return self._edge_shift(func, args, kwargs, base, lin)
        return _with_mask(lin, self._mask_of(func, args, kwargs, base), out)

    def _edge_shift(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        base: torch.Tensor,
        lin: Lineage,
    ) -> Lineage | None:
        """Per-edge scores minus a per-node maximum gathered to the edges (torch-geometric's
        softmax): the gather's index groups the edges by query node, and the shift is kept
        so that the statistics read the scores themselves."""
        other = _other_operand(args, kwargs, base)
        index = self._gathered.get(other) if other is not None else None
        if func not in MINUS or index is None or other is None or other.shape != base.shape:
            return None
        return replaced(lin, groups=index, row_shift=other.detach())

    def _moved(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
    ) -> Lineage | None:
        first = arg(args, kwargs, 0, "input")
        lin = self.of(first) if isinstance(first, torch.Tensor) else None
        if lin is None:
            return None
        if func in TANH:
            if lin.cap_input is not None:
                return None  # a second tanh: not a soft-cap
            return replaced(lin, cap_input=lin.factor, factor=1.0)
        if func in REDUCE:  # landmarks: a mean or sum of scaled q or k; of scores, not attention
            if lin.pair is not None:
                return _pair_product(lin, func, args, kwargs, out)
            return replaced(lin, mask=None) if lin.product is None else None
        if not isinstance(out, torch.Tensor) or not isinstance(first, torch.Tensor):
            return lin
        if lin.mask is not None:
            lin = replaced(lin, mask=_rearranged(lin.mask, func, args, kwargs, out))
        kept = first.shape[-3:] == out.shape[-3:]  # heads, rows and keys where they were
        if lin.head_factor is not None and not kept:  # the factor's axis was no head axis
            lin = _folded(lin, lin.head_factor)
        if lin.sink is not None and out.shape[-1:] != first.shape[-1:]:
            lin = replaced(lin, sink=None)
        if lin.row_shift is not None and (func not in KEEPS_MASK or out.shape != first.shape):
            lin = replaced(lin, row_shift=None)
        return lin

    def _joined(self, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> Lineage | None:
        """``cat`` of scores with other key columns (sinks) or with more scores (blocks)."""
        parts, dim = arg(args, kwargs, 0, "tensors"), arg(args, kwargs, 1, "dim") or 0
        if not isinstance(out, torch.Tensor) or not isinstance(parts, (list, tuple)):
            return None
        lins = [self.of(t) for t in parts]
        first = next((x for x in lins if x is not None and x.product is not None), None)
        if first is None:  # q or k joined from parts scaled alike (Reformer's adjacent chunks)
            one = lins[0]
            alike = one is not None and all(
                x is not None and x.head_factor is None and x.factor == one.factor for x in lins
            )
            return one if alike else None
        if dim % out.dim() != out.dim() - 1:  # blocks of rows or batch: all must be scores
            return first if all(x is not None for x in lins) else None
        masks, sinks = [], []
        for t, lin in zip(parts, lins, strict=True):
            shape = (*out.shape[:-1], t.shape[-1])
            mask = lin.mask if lin is not None and lin.mask is not None else None
            masks.append(
                torch.zeros(shape, dtype=torch.bool, device=out.device) if mask is None else mask
            )
            sink = lin.sink if lin is not None and lin.sink is not None else None
            untracked = torch.full((t.shape[-1],), lin is None, device=out.device)
            sinks.append(untracked if sink is None else sink)
        any_mask = any(lin is not None and lin.mask is not None for lin in lins)
        mask = torch.cat(
            [torch.broadcast_to(m, masks[0].shape[:-1] + m.shape[-1:]) for m in masks], -1
        )
        sink = torch.cat(sinks)
        return replaced(
            first, mask=mask if any_mask else None, sink=sink if bool(sink.any()) else None
        )

    def _stacked(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Lineage | None:
        """Parts stacked on a new axis: the factor they share stays (q or k scaled before
        the split into streams); scores stacked keep the first part's scale, not its mask."""
        parts = arg(args, kwargs, 0, "tensors")
        if not isinstance(parts, (list, tuple)) or not parts:
            return None
        lins = [self.of(t) for t in parts]
        one = lins[0]
        if one is None or any(x is None or x.factor != one.factor for x in lins):
            return None
        alike = all(x is not None and (x.product is None) == (one.product is None) for x in lins)
        if not alike or any(x is not None and x.head_factor is not None for x in lins):
            return None
        return replaced(one, mask=None, sink=None, row_shift=None)

    def _written(
        self, func: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        """Scores written into a buffer: the buffer (and what it is a view of) takes their lineage."""
        dst = arg(args, kwargs, 0, "input")
        src = args[2] if func is _TB.__setitem__ and len(args) > 2 else arg(args, kwargs, 1, "src")
        if func in (_TB.index_put_, torch.index_put):
            src = arg(args, kwargs, 2, "values")
        lin = self.of(src) if isinstance(src, torch.Tensor) else None
        if lin is None or lin.product is None or not isinstance(dst, torch.Tensor):
            return
        written = replaced(lin, mask=None, sink=None, head_factor=None)
        for t in (dst, dst._base):
            if isinstance(t, torch.Tensor) and self.of(t) is None:
                self._of[t] = written

    def additive_mask(self, t: torch.Tensor) -> torch.Tensor:
        """Positions an additive tensor masks.

        A tensor of two values, 0 and one negative value (``-inf``, ``finfo.min``, -1e4,
        Swin's -100), masks where it holds the negative one, whatever its size. Any other
        tensor is a bias (ALiBi, relative positions), with a mask folded in where it is at or
        below ``mask_value``.
        """
        return self._once(t, "mask", lambda: self._additive_mask(t))  # type: ignore[no-any-return]

    def _additive_mask(self, t: torch.Tensor) -> torch.Tensor:
        low = t.amin() if t.numel() else t.new_zeros(())
        if bool(low < 0):
            low_positions = t == low
            if not bool(torch.count_nonzero(t.masked_fill(low_positions, 0))):
                return low_positions
        level = _mask_level(t)
        return t <= self.mask_value if level is None else t <= max(level, self.mask_value)

    def _mask_of(
        self,
        func: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        base: torch.Tensor,
    ) -> torch.Tensor | None:
        """Positions of ``base`` (the tracked scores) that an add, sub, fill or where masks."""
        if func in FILL:
            mask, fill = arg(args, kwargs, 1, "mask"), arg(args, kwargs, 2, "value")
            ok = isinstance(mask, torch.Tensor) and mask.dtype == torch.bool
            return mask if ok and _negative(fill) else None
        if func is torch.where:
            cond, a, b = (arg(args, kwargs, i, n) for i, n in enumerate(_WHERE_ARGS))
            if not isinstance(cond, torch.Tensor) or cond.dtype != torch.bool:
                return None
            if a is base and _negative(b):
                return ~cond
            return cond if b is base and _negative(a) else None
        other = _other_operand(args, kwargs, base)
        if other is None or not other.is_floating_point() or not other.numel():
            return None
        return self.additive_mask(other if func in PLUS else -other)


def _mask_level(t: torch.Tensor) -> float | None:
    """The level below which a bias with a mask folded in is the mask, or None.

    A position bias plus a finite mask (Swin's shifted windows: a relative position bias plus
    -100, passed as one tensor) takes values in two groups: the bias's, and the mask value plus
    the bias's. The mask is the lower group where the gap between the two is wider than four
    times either group's whole range; a bias alone (ALiBi, T5's buckets) has no such gap, and
    neither has one value of a bias that stands apart from the rest at either end.
    """
    if not t.is_floating_point() or t.numel() < 2:
        return None
    flat = t.detach().reshape(-1)
    flat = flat[:: max(1, flat.numel() // 65536)].float()  # the gap shows in a strided subset
    flat = flat[torch.isfinite(flat)]
    if flat.numel() < 2:
        return None
    ordered = flat.sort().values
    gaps = ordered.diff()
    i = int(gaps.argmax())
    lower_low, lower_top, upper_low, upper_top = (float(ordered[j]) for j in (0, i, i + 1, -1))
    gap = upper_low - lower_top
    if lower_top >= 0 or gap <= 4 * max(upper_top - upper_low, lower_top - lower_low):
        return None
    return lower_top + gap / 2


def einsum_operands(args: tuple[Any, ...]) -> tuple[str, list[Any]] | None:
    """The equation and operands of an ``einsum`` call, in either calling form."""
    if not args or not isinstance(args[0], str):
        return None
    ops = list(args[1]) if len(args) == 2 and isinstance(args[1], (list, tuple)) else list(args[1:])
    return args[0].replace(" ", ""), ops


def _without_ellipsis(eq: str, a: torch.Tensor, b: torch.Tensor) -> str | None:
    """``eq`` with each ``...`` spelled out as letters it does not use (right-aligned)."""
    if "..." not in eq:
        return eq
    ins, out = eq.split("->")
    parts = ins.split(",")
    spare = [c for c in "ABCDEFGHIJKLMNOPQRSTUVWXYZ" if c not in eq]
    dims = [t.dim() - len(p.replace("...", "")) for p, t in zip(parts, (a, b), strict=True)]
    if min(dims) < 0 or max(dims) > len(spare):
        return None
    batch = "".join(spare[: max(dims)])
    parts = [p.replace("...", batch[len(batch) - n :]) for p, n in zip(parts, dims, strict=True)]
    return ",".join(parts) + "->" + out.replace("...", batch)


_Rows = Callable[[torch.Tensor], torch.Tensor]


def _rows(letters: str, contracted: list[str]) -> _Rows:
    """A function laying an operand out as (..., its other axes flattened, contracted)."""
    keep = [i for i, c in enumerate(letters) if c not in contracted]
    summed = [i for i, c in enumerate(letters) if c in contracted]
    return lambda t: t.permute(*keep, *summed).flatten(len(keep)).flatten(0, -2)


def einsum_layout(
    eq: str, a: torch.Tensor, b: torch.Tensor
) -> tuple[bool, int, _Rows, _Rows, tuple[int | None, int | None]] | None:
    """(whether a is the query side, head_dim, how to lay a and b out as rows, and the
    output axes that come from a alone and from b alone) of a two-operand einsum, if it is
    q·kᵀ-like. The softmax's axis tells later which of those two is the keys'."""
    if "->" not in eq or eq.count(",") != 1:
        return None
    spelled = _without_ellipsis(eq, a, b)
    if spelled is None or "." in spelled:
        return None
    ins, out = spelled.split("->")
    parts = ins.split(",")
    if len(out) < 2:
        return None
    ia, ib = parts
    if len(ia) != a.dim() or len(ib) != b.dim():
        return None
    contracted = [c for c in ia if c in ib and c not in out]
    if not contracted:
        return None
    sizes = dict(zip(ia, a.shape, strict=True))
    head_dim = math.prod(int(sizes[c]) for c in contracted)
    only_a = [i for i, c in enumerate(out) if c in ia and c not in ib]
    only_b = [i for i, c in enumerate(out) if c in ib and c not in ia]
    axes = (only_a[-1] if only_a else None, only_b[-1] if only_b else None)
    return out[-2] in ia, head_dim, _rows(ia, contracted), _rows(ib, contracted), axes


def head_scales(
    factor: float, head_factor: torch.Tensor | None, shape: Sequence[int]
) -> tuple[float, tuple[float, ...] | None]:
    """The scale of scores of ``shape`` (..., heads, rows, keys): one number, and one per head
    where per-head factors differ (the number is then their geometric mean)."""
    if head_factor is None:
        return factor, None
    hf = torch.broadcast_to(head_factor, (*shape[:-2], 1, 1)).float()
    heads = hf.reshape(-1, *hf.shape[-3:])[0, :, 0, 0] if len(shape) >= 3 else hf.reshape(1)
    if bool((heads == heads[0]).all()):
        return factor * float(heads[0]), None
    return factor * mean_factor(heads), tuple(factor * float(h) for h in heads)


def is_batched(t: Any) -> bool:
    """Whether ``t`` is one sample's view of a tensor batched by ``torch.vmap``."""
    return isinstance(t, torch.Tensor) and bool(torch._C._functorch.is_batchedtensor(t))


def physical(t: Any) -> Any:
    """Inside ``torch.vmap``, the whole batch behind a tensor of one sample: each vmapped
    dimension moved to the front (over heads, or batch and heads); other values as given."""
    functorch = torch._C._functorch
    while is_batched(t):
        bdim = functorch.maybe_get_bdim(t)
        t = functorch.get_unwrapped(t).movedim(bdim, 0)
    return t


def position_range(scale: float | None, *lins: Lineage) -> tuple[float, float] | None:
    """The smallest and largest scale over the positions, where a factor on the way changes
    with the position (a length temperature); None where none does."""
    ranges = [x.position_factor for x in lins if x.position_factor is not None]
    if scale is None or not ranges:
        return None
    low, high = math.prod(r[0] for r in ranges), math.prod(r[1] for r in ranges)
    return scale * low, scale * high


def unscaled(t: torch.Tensor, factor: float) -> torch.Tensor:
    """``t`` as before a factor the code applied to it (no copy where there was none)."""
    return t if factor == 1.0 else t / factor
