"""Attention paths read inside code that ``torch.compile`` traces.

Dynamo traces the monitor's mode with the code it compiles, so the mode sees each torch
function of that code once, at trace time, and none of its values. For a function in
[TRACED][attnscale._monitor.calls.TRACED] the mode keeps the call and its arguments (not its
outputs) in a list; dynamo turns that into a side effect of the compiled code: the list is
appended to each time the compiled code returns. The monitor then reads the kept calls with
the path's handler, eagerly, when the model's own code goes on (its next torch function, or a
module starting or ending; ``Capture.read_traced``). The compiled kernel itself runs as without
the monitor, and its output is not changed.

Dynamo guards the compiled code on the list's length. A compiled call made while calls are
still kept (compiled calls back to back, with no torch function or module of the model's own
between them) is compiled once more for that length; past dynamo's recompile limit the code
runs eagerly, where the eager path reads it. An attribute store instead of the list would need
no guard, but torch 2.13's dynamo drops such a store made after a second FlexAttention call.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from .adapters import flex_attention_op, on_flex
from .calls import Call, Reader, handles

__all__ = ["on_compiled_flex"]


@handles(
    flex_attention_op(),
    kind="flex_attention",
    path="flex_attention:compiled",
    traced=True,
    fused=True,
    gradients=False,
    all_rows=True,
    what="FlexAttention under torch.compile (torch.compile(flex_attention), as transformers "
    "runs it): q, k, score_mod, block mask and scale= as the compiled call received them, "
    "kept by the traced code and read after it returns; the sampled rows' scores recomputed "
    "as on the eager path, the kernel's own output untouched",
)
def on_compiled_flex(
    capture: Reader, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any
) -> Call | None:
    """The ``flex_attention`` operator as compiled code called it: its arguments are those of
    the eager operator without the buffers (the traced ``score_mod`` and ``mask_mod`` read
    theirs through their closures), so the eager handler reads them."""
    call = on_flex(capture, func, args, kwargs, out)
    return None if call is None else dataclasses.replace(call, path="flex_attention:compiled")
