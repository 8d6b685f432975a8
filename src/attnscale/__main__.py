"""``python -m attnscale check TARGET``: run the attention monitor on a model, print its report.

TARGET is a local Hugging Face model directory (its weights if it has them, else random ones
from its ``config.json``), a ``config.json`` file, or ``module:function``, a function that
returns ``(model, inputs)`` with inputs a tensor, a tuple or a dict of keyword arguments.
Nothing is downloaded. The exit status is 1 when a finding is at ``--fail-on`` or worse, so
the command can guard a CI job; 2 for a target it cannot load.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn

from ._monitor import AttentionMonitor
from ._monitor.report import SEVERITY_RANK
from .testing import call


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m attnscale", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="run the monitor on one forward pass")
    check.add_argument("target", help="model directory, config.json, or module:function")
    check.add_argument("--json", type=Path, help="also write the report as JSON here")
    check.add_argument(
        "--fail-on", choices=sorted(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__), default="warning"
    )
    check.add_argument("--all-rows", action="store_true", help="per-head statistics of every row")
    check.add_argument("--batch", type=int, default=2, help="token batch for a model directory")
    check.add_argument("--seq", type=int, default=64, help="tokens per row for a model directory")
    args = parser.parse_args(argv)
    try:
        model, inputs = _load(args.target, args.batch, args.seq)
    except (ImportError, OSError, ValueError, AttributeError, TypeError) as err:
        print(f"attnscale check: cannot load {args.target!r}: {err}", file=sys.stderr)
        return 2
    with torch.no_grad(), AttentionMonitor(model, all_rows=args.all_rows) as monitor:
        call(model, inputs)
    report = monitor.report()
    print(report)
    if args.json is not None:
        args.json.write_text(json.dumps(report.to_dict(), indent=1))
    worst = max((SEVERITY_RANK[f.severity] for f in report.findings), default=-1)
    return 1 if worst >= SEVERITY_RANK[args.fail_on] else 0


def _load(target: str, batch: int, seq: int) -> tuple[nn.Module, Any]:
    path = Path(target)
    if path.exists():
        return _load_hf(path, batch, seq)
    module_name, _, function = target.partition(":")
    if not function:
        raise ValueError("expected an existing path or module:function")
    made = getattr(importlib.import_module(module_name), function)()
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module)):
        raise TypeError(f"{target} must return (model, inputs), got {type(made).__name__}")
    return made[0].eval(), made[1]


def _load_hf(path: Path, batch: int, seq: int) -> tuple[nn.Module, Any]:
    import transformers  # type: ignore[import-not-found,unused-ignore]

    directory = path.parent if path.is_file() else path
    config = transformers.AutoConfig.from_pretrained(directory, local_files_only=True)
    weights = any(directory.glob("*.safetensors")) or any(directory.glob("*.bin"))
    if weights:
        model = transformers.AutoModel.from_pretrained(directory, local_files_only=True)
    else:  # a config alone: the same architecture with random weights
        model = transformers.AutoModel.from_config(config)  # type: ignore[no-untyped-call,unused-ignore]
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    if vocab <= 0:
        raise ValueError("the config has no vocab_size: give a module:function target instead")
    seq = min(seq, int(getattr(config, "max_position_embeddings", seq) or seq))
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(0))
    return model.eval(), {"input_ids": ids}


if __name__ == "__main__":
    sys.exit(main())
