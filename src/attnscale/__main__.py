"""``python -m attnscale check TARGET``: run the attention monitor on a model, print its report.

TARGET is a local Hugging Face model directory (its weights if it has them, else a random
initialisation from its ``config.json``), a ``config.json`` file, or ``module:function``, a
function that returns ``(model, inputs)`` with inputs a tensor, a tuple or a dict of keyword
arguments. Nothing is downloaded. ``--seed`` (default 0) seeds torch's random numbers before
the target is loaded, so a random initialisation and random inputs are the same on every run.
Before the report, one line says which weights ran: ``weights: <dir> (safetensors)``, or
``weights: random initialisation from config.json, seed 0``.

Exit status:

- 0: no finding at ``--fail-on`` (default ``warning``) or worse;
- 1: a finding at ``--fail-on`` or worse, so the command can guard a CI job;
- 2: the command could not check the model: a bad option (``--seq 0``), a target it cannot
  load (the function raised), a model whose forward raised, or a ``--json`` file it cannot
  write. One line on stderr names the problem.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NoReturn

import torch
from torch import nn

from . import __version__
from ._monitor import AttentionMonitor
from ._monitor.report import SEVERITY_RANK
from .testing import call


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr, and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {value}")
    return value


def _seed(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 2**64:
        raise argparse.ArgumentTypeError(f"expected an integer in [0, 2**64), got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m attnscale", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"attnscale {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser(
        "check",
        help="run the monitor on one forward pass",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    check.add_argument("target", help="model directory, config.json, or module:function")
    check.add_argument("--json", type=Path, help="also write the report as JSON here")
    check.add_argument(
        "--fail-on",
        choices=sorted(SEVERITY_RANK, key=SEVERITY_RANK.__getitem__),
        default="warning",
        help="exit 1 when a finding is at this severity or worse (default warning)",
    )
    check.add_argument("--all-rows", action="store_true", help="per-head statistics of every row")
    check.add_argument(
        "--batch", type=_positive_int, default=2, help="token batch for a model directory"
    )
    check.add_argument(
        "--seq", type=_positive_int, default=64, help="tokens per row for a model directory"
    )
    check.add_argument(
        "--seed", type=_seed, default=0, help="seed of random weights and inputs (default 0)"
    )
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.json is not None and (problem := _unwritable(args.json)):
        return _fail(f"cannot write --json {str(args.json)!r}: {problem}")
    torch.manual_seed(args.seed)
    try:
        model, inputs, weights = _load(args.target, args.batch, args.seq, args.seed)
    except Exception as err:  # whatever the target's own code raises: one line, not a traceback
        return _fail(f"cannot load {args.target!r}: {_one_line(err)}")
    print(f"weights: {weights}")
    try:
        with torch.no_grad(), AttentionMonitor(model, all_rows=args.all_rows) as monitor:
            call(model, inputs)
    except Exception as err:
        return _fail(f"the model's forward raised {_one_line(err)}")
    report = monitor.report()
    print(report)
    if args.json is not None:
        try:
            args.json.write_text(json.dumps(report.to_dict(), indent=1))
        except OSError as err:
            return _fail(f"cannot write --json {str(args.json)!r}: {_one_line(err)}")
    worst = max((SEVERITY_RANK[f.severity] for f in report.findings), default=-1)
    return 1 if worst >= SEVERITY_RANK[args.fail_on] else 0


def _fail(message: str) -> int:
    print(f"attnscale check: {message}", file=sys.stderr)
    return 2


def _one_line(err: BaseException) -> str:
    """``Type: first line of the message``, for a one-line error report."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0]}" if lines else type(err).__name__


def _unwritable(path: Path) -> str | None:
    """Why ``path`` cannot be written, checked before the model runs; None if it can."""
    folder = path.parent if str(path.parent) else Path(".")
    if path.is_dir():
        return "it is a directory"
    if not folder.is_dir():
        return f"no directory {str(folder)!r}"
    if not os.access(path if path.exists() else folder, os.W_OK):
        return "permission denied"
    return None


def _load(target: str, batch: int, seq: int, seed: int) -> tuple[nn.Module, Any, str]:
    """The model, its inputs, and which weights it has (for the line before the report)."""
    path = Path(target)
    if path.exists():
        return _load_hf(path, batch, seq, seed)
    module_name, _, function = target.partition(":")
    if not function:
        raise ValueError("expected an existing path or module:function")
    made = getattr(importlib.import_module(module_name), function)()
    if not (isinstance(made, tuple) and len(made) == 2 and isinstance(made[0], nn.Module)):
        raise TypeError(f"{target} must return (model, inputs), got {type(made).__name__}")
    return made[0].eval(), made[1], f"made by {target} (seed {seed})"


def _load_hf(path: Path, batch: int, seq: int, seed: int) -> tuple[nn.Module, Any, str]:
    import transformers  # type: ignore[import-not-found,unused-ignore]

    directory = path.parent if path.is_file() else path
    config = transformers.AutoConfig.from_pretrained(directory, local_files_only=True)
    kinds = [kind for kind in ("safetensors", "bin") if any(directory.glob(f"*.{kind}"))]
    if kinds:
        model = transformers.AutoModel.from_pretrained(directory, local_files_only=True)
        weights = f"{directory} ({kinds[0]})"
    else:  # a config alone: the same architecture, initialised from torch's seeded generator
        model = transformers.AutoModel.from_config(config)  # type: ignore[no-untyped-call,unused-ignore]
        weights = f"random initialisation from config.json, seed {seed}"
    vocab = int(getattr(config, "vocab_size", 0) or 0)
    if vocab <= 0:
        raise ValueError("the config has no vocab_size: give a module:function target instead")
    seq = min(seq, int(getattr(config, "max_position_embeddings", seq) or seq))
    ids = torch.randint(0, vocab, (batch, seq), generator=torch.Generator().manual_seed(seed))
    return model.eval(), {"input_ids": ids}, weights


if __name__ == "__main__":
    sys.exit(main())
