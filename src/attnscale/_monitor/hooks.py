"""The process-wide part of the capture: global module hooks, the module stack, fast paths.

Module paths come from global module hooks, which unlike per-module hooks do not switch
PyTorch's fast paths off. All active captures share one registry: the hooks are installed
when the first capture starts and removed when the last one stops, in whatever order they
stop.
"""

from __future__ import annotations

import collections
import warnings
from typing import Any, Protocol

import torch
from torch import nn

__all__ = ["REGISTRY", "Listener", "Registry", "set_stack", "stack_snapshot"]


class Listener(Protocol):
    """What the global hooks tell a monitor: a module starts, or a module that ran attention
    inside a kernel (nn.MultiheadAttention, the fused encoder layer) returned."""

    def on_model_call(self, module: nn.Module, stack: list[nn.Module]) -> None: ...

    def on_compiled(self, module: nn.Module) -> None: ...

    def read_traced(self) -> None: ...

    def flush(self) -> None: ...

    def on_mha(
        self, module: nn.MultiheadAttention, args: Any, kwargs: Any, output: Any
    ) -> None: ...

    def on_fused_encoder_layer(
        self, layer: nn.TransformerEncoderLayer, args: Any, kwargs: Any
    ) -> None: ...


def stack_snapshot() -> list[Any]:
    return [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]


def set_stack(modes: list[Any]) -> None:
    while torch._C._len_torch_function_stack():
        torch._C._pop_torch_function_stack()
    for m in modes:
        torch._C._push_on_torch_function_stack(m)


_COMPILE_HOOK_WARNING = r"Using `torch.compile\(module\)` when there are global hooks"

# modules whose forward checks for an active mode to decide on a fused fast path
_FAST_PATH_MODULES = (nn.MultiheadAttention, nn.TransformerEncoderLayer, nn.TransformerEncoder)


class Registry:
    """What all active captures share: global module hooks and the module stack.

    The hooks are installed when the first capture starts and removed when the
    last one stops, in whatever order they stop.
    """

    def __init__(self) -> None:
        self.captures: list[Listener] = []
        self.stack: list[nn.Module] = []
        self.handles: list[Any] = []
        self.suspended: tuple[nn.Module, list[Any]] | None = None
        self.mha_calls: collections.Counter[int] = collections.Counter()
        self.mha_calls_before: dict[int, int] = {}  # per running encoder layer
        self.warning_filter: Any = None
        self._pre, self._post = self.pre_hook, self.post_hook  # one object each, for good

    def add(self, capture: Listener) -> None:
        if not self.captures:
            from torch.nn.modules import module as module_mod

            if not module_mod._has_any_global_hook():  # type: ignore[no-untyped-call]
                # torch.compile's wrapper warns about global hooks at every call; these are
                # the monitor's, so the user's code would not have warned
                warnings.filterwarnings("ignore", message=_COMPILE_HOOK_WARNING)
                self.warning_filter = warnings.filters[0]
            self._install(module_mod)
        self.captures.append(capture)

    def _install(self, module_mod: Any) -> None:
        """Put the global hooks in place under the same keys and as the same objects every
        time: torch.compile guards on the global hook dicts, and new keys (a new monitor
        per step) would recompile the model at every monitored call."""
        if not self.handles:  # the first time: torch's own registration picks the keys
            self.handles = [
                module_mod.register_module_forward_pre_hook(self._pre),
                module_mod.register_module_forward_hook(
                    self._post, with_kwargs=True, always_call=True
                ),
            ]
            return
        pre, post = (h.id for h in self.handles)
        module_mod._global_forward_pre_hooks[pre] = self._pre
        module_mod._global_forward_hooks[post] = self._post
        module_mod._global_forward_hooks_with_kwargs[post] = True
        module_mod._global_forward_hooks_always_called[post] = True

    def remove(self, capture: Listener) -> None:
        if capture in self.captures:
            self.captures.remove(capture)
        if not self.captures:
            from torch.nn.modules import module as module_mod

            for h in self.handles:  # removed, their keys kept for the next monitor
                h.remove()
                # torch's handle forgets the with_kwargs flag, which alone keeps
                # _has_any_global_hook() true (and torch.compile warning) after removal
                module_mod._global_forward_hooks_with_kwargs.pop(h.id, None)
            if self.warning_filter in warnings.filters:
                warnings.filters.remove(self.warning_filter)  # type: ignore[attr-defined]
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
        for c in self.captures:
            c.on_model_call(module, self.stack)
        # torch.compile's wrapper (a submodule: no getattr, whose miss costs a raised error)
        if isinstance(module._modules.get("_orig_mod"), nn.Module):
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
            modes = stack_snapshot()
            set_stack([m for m in modes if not any(m is c for c in self.captures)])
            self.suspended = (module, modes)

    def post_hook(self, module: nn.Module, args: Any, *rest: Any) -> None:
        # (kwargs, output) normally; only (output,) when forward raised, since torch
        # calls always-called hooks without kwargs then
        if torch.compiler.is_compiling():
            return
        kwargs, output = rest if len(rest) == 2 else ({}, None)
        if not isinstance(module, torch.fx.GraphModule):  # not a graph inside compiled code
            for c in self.captures:  # what compiled code kept in this module is this module's
                c.read_traced()
        if self.stack and self.stack[-1] is module:
            self.stack.pop()
        elif module in self.stack:  # unwinding after an exception
            while self.stack and self.stack.pop() is not module:
                pass
        if self.suspended is not None and self.suspended[0] is module:
            set_stack(self.suspended[1])
            self.suspended = None
        if output is None:  # the module raised: nothing more to measure
            pass
        elif isinstance(module, nn.MultiheadAttention):
            for c in list(self.captures):
                c.on_mha(module, args, kwargs, output)
        elif isinstance(module, nn.TransformerEncoderLayer):
            before = self.mha_calls_before.pop(id(module), None)
            if before == self.mha_calls[id(module.self_attn)]:
                # the fused fast path ran the layer without calling its attention module
                for c in list(self.captures):
                    c.on_fused_encoder_layer(module, args, kwargs)
        if not self.stack:  # the outermost module returned: its calls are measured together
            for c in list(self.captures):
                c.flush()


REGISTRY = Registry()
