r"""Full-budget experiments, stored with their provenance and checked at every build.

Site-only, no stability promise. Some claims of the guide need budgets that a docs build on two
CPU cores cannot afford (many seeds, fine learning-rate sweeps, thousands of steps). Each such
experiment is an [Experiment][] defined in a module of ``guide.studies``:

- ``nox -s experiments -- NAME`` (``python -m guide.stored run NAME``) runs it at its
  full budget, one part at a time, and stores every part as it finishes in
  ``guide/src/guide/results/NAME/`` (compressed arrays, ``PART.npz``) with its provenance in
  ``provenance.json``: the commit, a hash of the code that produced it, torch and Python
  versions, the device and thread count, the budget (seeds included), the wall time and the
  date. A run that stops part-way resumes at the first missing part.
- A guide page calls [load][] for the stored full run: it fails when the experiment's code
  changed since the run, naming the experiment and the command that refreshes it. The page
  draws its decisive figures from the stored arrays and prints the provenance.
- The page then reruns the experiment at its reduced budget, live, and [verify][] compares the
  two with the experiment's own checks (numbers within stated bounds, and the direction of
  every verdict); a failed check raises, so the build fails.

The code hash covers the experiment's module and the library modules it declares in ``uses``,
after removing docstrings, comments (``ast``) and the code that only checks a run (the
``REDUCED`` budget and the ``agree`` functions), so an edit to prose or to a check does not
invalidate hours of computation.

An edit to the code that only moves or renames it (a refactor) changes the hash but not a
single number. So each full run also stores a *fingerprint* in its provenance: every array of
every part at the reduced budget, run on the CPU with one thread, kept as SHA-256 hashes per
*arithmetic* (the CPU model, ATen's CPU capability, the BLAS and its reproducibility mode, torch
and Python: where these are the same, one thread gives the same bits from run to run) and once
as values (``fingerprint.npz``). Where the code hash differs, [load][] reruns the fingerprint
(seconds) and accepts the stored run only if today's code reproduces it: bit for bit on an
arithmetic where it was recorded, and elsewhere within the experiment's ``tolerances``, which
are set from the spread measured across arithmetics (``python -m guide.stored spread
NAME`` measures it, and shows that a planted change of behaviour lies outside). [confirm][]
(``python -m guide.stored confirm NAME``) records a code hash that reproduced it, so
that no build reruns it again; ``fingerprint NAME`` records the bits of this machine's
arithmetic.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import datetime
import fcntl
import hashlib
import importlib
import inspect
import json
import math
import os
import platform
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import torch

from .tables import Table

__all__ = [
    "RESULTS",
    "Check",
    "Disagreement",
    "Experiment",
    "StaleResults",
    "Stored",
    "Tolerance",
    "arithmetic",
    "checks_table",
    "close",
    "code_hash",
    "confirm",
    "experiment",
    "fingerprint",
    "load",
    "rerun",
    "same_direction",
    "spread",
    "store_fingerprint",
    "verify",
]

#: Where the stored full runs live: package data, so that a downloaded example finds them too.
RESULTS = Path(__file__).parent / "results"
STUDIES = "guide.studies"
#: What a reader runs to refresh an experiment.
COMMAND = "nox -s experiments -- {name}"

Arrays = dict[str, np.ndarray]
Budget = dict[str, Any]
#: ``part/array`` pattern (``fnmatch``) -> a [Tolerance][]: how far a fingerprint rerun on
#: another arithmetic may lie from the stored values. The first matching pattern applies; an
#: array that none matches must be equal.
Tolerances = Mapping[str, "Tolerance"]


@dataclass(frozen=True)
class Tolerance:
    """How far an array of a fingerprint rerun may lie from the stored one (see [deviation][]).

    ``first``: compare only the first ``first`` entries of the last axis (the early steps of a
    curve, before a chaotic run lets the last bits grow), or nothing with ``first=0`` (an array
    that another arithmetic moves as much as a change of behaviour does: the other arrays must
    then catch that change).
    """

    rtol: float
    atol: float = 0.0
    first: int | None = None


FINGERPRINT_VALUES = "fingerprint.npz"


class StaleResults(RuntimeError):
    """The stored full run is missing, incomplete, or was made by different code."""


class Disagreement(AssertionError):
    """The live reduced run does not agree with the stored full run."""


@dataclass(frozen=True)
class Check:
    """One comparison of the live reduced run with the stored full run."""

    what: str
    stored: str
    live: str
    bound: str
    ok: bool


@dataclass(frozen=True)
class Experiment:
    """A full-budget experiment: its parts, its two budgets and its agreement checks.

    Attributes
    ----------
    name : str
        Name of the experiment (and of its module in ``guide.studies``).
    parts : Callable[[Budget], list[str]]
        The parts of a run at a budget; each part is run and stored on its own.
    run_part : Callable[[str, Budget, str], dict[str, np.ndarray]]
        Runs one part at a budget on a device (``"cpu"``, ``"cuda"``), returning named arrays.
    full, reduced : Mapping
        The two budgets (JSON-serialisable settings: seeds, learning rates, steps...).
    agree : Callable[[Stored, dict], list[Check]]
        Compares the reduced run's parts with the stored full run.
    uses : tuple of modules
        Library modules whose code, with the experiment's own module, makes the code hash.
    """

    name: str
    parts: Callable[[Budget], list[str]]
    run_part: Callable[[str, Budget, str], Arrays]
    full: Budget
    reduced: Budget
    agree: Callable[[Stored, dict[str, Arrays]], list[Check]]
    uses: tuple[ModuleType, ...]

    @property
    def command(self) -> str:
        return COMMAND.format(name=self.name)


@dataclass(frozen=True)
class Stored:
    """A stored full run: its arrays by part and its provenance (``provenance.json``)."""

    name: str
    parts: dict[str, Arrays]
    provenance: dict[str, Any]
    code_hash_now: str = ""  # today's code hash, where it differs from the stored run's
    reproduced: str = "bit for bit"  # how today's code reproduced the fingerprint

    @property
    def budget(self) -> dict[str, Any]:
        return dict(self.provenance["budget"])

    def summary(self) -> str:
        """The provenance in a few lines, for the page."""
        runs = list(self.provenance["parts"].values())
        commits = sorted(
            {r["commit"][:10] + (" (plus uncommitted changes)" if r["dirty"] else "") for r in runs}
        )
        devices = sorted({f"{r['device']}, {r['threads']} thread(s)" for r in runs})
        dates = sorted(r["finished"][:10] for r in runs)
        hours = _hours(runs)
        seeds = self.budget.get("seeds")
        lines = [
            f"Stored full run of `{self.name}`: {len(runs)} part(s), {hours:.2f} h of computation",
            f"  finished {dates[0]}" + (f" to {dates[-1]}" if dates[-1] != dates[0] else ""),
            f"  code hash {self.provenance['code_hash'][:12]}; commit(s):",
            *(f"    {c}" for c in commits),
            f"  torch {', '.join(sorted({r['torch'] for r in runs}))}, Python "
            f"{', '.join(sorted({r['python'] for r in runs}))}; device(s):",
            *(f"    {d}" for d in devices),
        ]
        if seeds is not None:
            lines.append(f"  seeds {seeds}")
        if self.code_hash_now:
            # a "label: value" line, which the Chinese catalogue keeps whole
            lines.append(
                f"  current code: hash {self.code_hash_now[:12]} (fingerprint reproduced "
                f"{self.reproduced})"
            )
        lines.append(f"  refresh with: {COMMAND.format(name=self.name)}")
        return "\n".join(lines)


def experiment(name: str) -> Experiment:
    """The experiment ``name``, from its module in ``guide.studies``."""
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"experiment name must be an identifier, got {name!r}")
    try:
        module = importlib.import_module(f"{STUDIES}.{name}")
    except ModuleNotFoundError as err:
        if err.name != f"{STUDIES}.{name}":
            raise
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(names())}") from None
    exp: Experiment = module.EXPERIMENT
    return exp


def names() -> list[str]:
    """Every experiment of ``guide.studies``."""
    folder = Path(importlib.import_module(STUDIES).__file__ or "").parent
    return sorted(p.stem for p in folder.glob("*.py") if not p.stem.startswith("_"))


# Module-level names that check a run rather than produce it: the reduced budget and the
# agreement checks. They stay out of the code hash, so tightening a check or shrinking the
# reduced budget does not discard a stored run that took hours.
CHECKING = frozenset({"agree", "REDUCED", "TOLERANCES"})


def _assigned(node: ast.stmt) -> set[str]:
    if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return {node.name}
    targets = node.targets if isinstance(node, ast.Assign) else [getattr(node, "target", None)]
    return {t.id for t in targets if isinstance(t, ast.Name)}


def producing_code(module: ModuleType) -> str:
    """A module's producing code: no docstrings, comments, formatting or checking code."""
    tree = ast.parse(inspect.getsource(module))
    tree.body = [node for node in tree.body if not _assigned(node) & CHECKING]
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            body[0] = ast.Pass()  # the docstring
    return _canonical(tree)


def _canonical(node: object) -> str:
    """An AST as text, the same on every Python: ``ast.dump`` differs across versions in the
    empty fields it shows (3.12 added ``type_params``, 3.13 hides empty ones), and
    ``ast.unparse`` in how it quotes f-strings."""
    if isinstance(node, ast.AST):
        fields = (f"{k}={_canonical(v)}" for k, v in ast.iter_fields(node) if v not in (None, []))
        return f"{type(node).__name__}({', '.join(fields)})"
    if isinstance(node, list):
        return f"[{', '.join(map(_canonical, node))}]"
    return repr(node)


def code_hash(exp: Experiment) -> str:
    """SHA-256 of the producing code of the experiment's module and of the modules it uses.

    Docstrings, comments and the module-level names in ``CHECKING`` (the reduced budget and the
    agreement checks) are left out.
    """
    h = hashlib.sha256()
    for module in (importlib.import_module(f"{STUDIES}.{exp.name}"), *exp.uses):
        h.update(module.__name__.encode() + b"\0" + producing_code(module).encode() + b"\0")
    return h.hexdigest()


def _folder(name: str, root: Path | None) -> Path:
    return (RESULTS if root is None else root) / name


def _read_provenance(folder: Path) -> dict[str, Any]:
    path = folder / "provenance.json"
    if not path.exists():
        return {}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _took(prov: dict[str, Any], template: str) -> str:
    """How long the stored parts of a run took, and where, as ``template`` fills it in;
    empty where none is stored."""
    runs = list(prov.get("parts", {}).values())
    if not runs:
        return ""
    devices = ", ".join(sorted({r["device"] for r in runs}))
    return template.format(f"{_hours(runs):.1f} h on {devices}")


def _hours(runs: list[dict[str, Any]]) -> float:
    """The computation time of stored parts, in hours."""
    return float(sum(r["seconds"] for r in runs)) / 3600


def load(name: str, *, root: Path | None = None) -> Stored:
    """The stored full run of experiment ``name``, checked against today's code.

    Raises
    ------
    StaleResults
        If no complete full run is stored, or the code hash differs from today's and today's
        code does not reproduce the stored fingerprint; the message names the experiment and
        the command that refreshes it.
    """
    exp = experiment(name)
    folder = _folder(name, root)
    prov = _read_provenance(folder)
    expected = exp.parts(exp.full)
    if not prov or any(p not in prov.get("parts", {}) for p in expected):
        done = len(prov.get("parts", {})) if prov else 0
        raise StaleResults(
            f"experiment {name!r}: no complete full run is stored ({done} of {len(expected)} "
            f"parts); run it with `{exp.command}`{_took(prov, ' (its stored parts took {})')}"
        )
    refresh = f"refresh it with `{exp.command}`{_took(prov, ' (the stored run took {})')}"
    if dict(prov["budget"]) != _jsonable(exp.full):
        raise StaleResults(
            f"experiment {name!r}: its full budget changed since the stored full run; {refresh}"
        )
    now = code_hash(exp)
    how = "bit for bit"
    if prov["code_hash"] != now:
        how, why = _reproduced(exp, folder, prov, now)
        if why:
            raise StaleResults(
                f"experiment {name!r}: its code changed since the stored full run (stored code "
                f"hash {prov['code_hash'][:12]}, now {now[:12]}) and {why}; {refresh}"
            )
    changed = "" if prov["code_hash"] == now else now
    return Stored(name, _arrays(folder, expected), prov, changed, how)


def progress(name: str, *, root: Path | None = None) -> tuple[int, int]:
    """How many parts of experiment ``name``'s full run are stored by today's code and budget,
    and how many it has: a full run still being made has some."""
    exp = experiment(name)
    prov = _read_provenance(_folder(name, root))
    expected = exp.parts(exp.full)
    if prov.get("code_hash") != code_hash(exp) or prov.get("budget") != _jsonable(exp.full):
        return 0, len(expected)
    return sum(p in prov["parts"] for p in expected), len(expected)


def _arrays(folder: Path, parts: Sequence[str]) -> dict[str, Arrays]:
    out = {}
    for part in parts:
        with np.load(folder / f"{part}.npz") as data:
            out[part] = {k: data[k] for k in data.files}
    return out


# --- fingerprints: the behaviour of the code that made a run ---------------------------------


def arithmetic() -> dict[str, str]:
    """What decides the bits of a one-thread CPU run on this machine.

    The same code on one thread gives the same bits from run to run, but not across CPUs: the
    CPU model, the kernels ATen picks for it (``ATEN_CPU_CAPABILITY``), the BLAS and its
    conditional-reproducibility mode (``MKL_CBWR``), torch and Python each change them. A stored
    fingerprint's bits are compared only where all of these are the same.
    """
    config = torch.__config__.show()
    blas = re.search(r"BLAS_INFO=(\w+)", config)
    mkl = re.search(r"Math Kernel Library Version (\S+)", config)
    return {
        "cpu": _cpu_model(),
        "machine": platform.machine(),
        "capability": torch.backends.cpu.get_cpu_capability(),
        "blas": (blas[1] if blas else "unknown") + (f" {mkl[1]}" if mkl else ""),
        "mkl_cbwr": os.environ.get("MKL_CBWR", ""),
        "torch": torch.__version__,
        "python": platform.python_version(),
    }


def tolerances(exp: Experiment) -> Tolerances:
    """The experiment's ``TOLERANCES`` (module level, outside the code hash); none: exact."""
    found: Tolerances = getattr(importlib.import_module(f"{STUDIES}.{exp.name}"), "TOLERANCES", {})
    return found


def fingerprint(exp: Experiment, budget: Budget) -> Arrays:
    """Every part of ``exp`` at ``budget``, on the CPU with one thread: ``part/array`` ->
    values."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return {
            f"{part}/{key}": np.asarray(value)
            for part in exp.parts(budget)
            for key, value in exp.run_part(part, budget, "cpu").items()
        }
    finally:
        torch.set_num_threads(threads)


def hashes(values: Arrays) -> dict[str, str]:
    """Per array, a SHA-256 of its dtype, shape and bytes."""
    out = {}
    for key, value in values.items():
        a = np.ascontiguousarray(value)
        out[key] = hashlib.sha256(f"{a.dtype.str}{a.shape}".encode() + a.tobytes()).hexdigest()
    return out


def deviation(kept: np.ndarray, live: np.ndarray, rtol: float, atol: float) -> float:
    r"""How far ``live`` lies from ``kept``, in units of the tolerance: the norm of the
    difference over $\text{rtol}\,\lVert \text{kept} \rVert + \text{atol}\sqrt{n}$, both over
    the finite elements (at most 1 is within). A norm, not each element: an element near 0
    (a bias that gets only round-off gradients, a loss at round-off level) would otherwise
    decide alone. Other shapes or dtypes, a NaN or an infinity in other places, and any
    difference where the tolerance is 0, give infinity; integers and strings must be equal."""
    if kept.shape != live.shape or kept.dtype != live.dtype:
        return math.inf
    if kept.dtype.kind not in "fc":
        return 0.0 if np.array_equal(kept, live) else math.inf
    a, b = kept.astype(np.float64), live.astype(np.float64)
    finite = np.isfinite(a)
    if not np.array_equal(finite, np.isfinite(b)) or not np.array_equal(
        a[~finite], b[~finite], equal_nan=True
    ):
        return math.inf
    diff = float(np.linalg.norm(b[finite] - a[finite]))
    bound = rtol * float(np.linalg.norm(a[finite])) + atol * math.sqrt(int(finite.sum()))
    if bound == 0:
        return 0.0 if diff == 0 else math.inf
    return diff / bound


def tolerance_of(key: str, tol: Tolerances) -> Tolerance:
    """The first tolerance whose pattern matches ``part/array`` (none: equal)."""
    return next((v for p, v in tol.items() if fnmatchcase(key, p)), Tolerance(0.0))


def deviations(kept: Arrays, live: Arrays, tol: Tolerances) -> dict[str, float]:
    """Per array, its [deviation][] from the stored values under the first matching tolerance."""
    out = {}
    for key in kept.keys() | live.keys():
        t = tolerance_of(key, tol)
        if key not in kept or key not in live:
            out[key] = math.inf
        elif t.first is None:
            out[key] = deviation(kept[key], live[key], t.rtol, t.atol)
        elif t.first == 0 or kept[key].shape != live[key].shape:
            out[key] = 0.0 if t.first == 0 else math.inf
        else:
            part = (..., slice(0, t.first))
            out[key] = deviation(kept[key][part], live[key][part], t.rtol, t.atol)
    return out


# (experiment, results folder, code hash) -> (how, why not): one rerun per process, however
# many pages load the run
_REPRODUCED: dict[tuple[str, Path, str], tuple[str, str]] = {}


def _reproduced(exp: Experiment, folder: Path, prov: dict[str, Any], now: str) -> tuple[str, str]:
    """How today's code reproduces the stored run's fingerprint, and why it cannot stand for
    the stored run ("" when it can)."""
    fp = prov.get("fingerprint")
    if not fp or not fp.get("records"):
        return "", "no fingerprint of its behaviour is stored"
    for record in fp.get("reproduced", []):
        if record["code_hash"] == now:  # checked by `confirm`
            return record.get("how", "bit for bit"), ""
    key = (exp.name, folder, now)
    if key not in _REPRODUCED:
        _REPRODUCED[key] = compare(exp, folder, fp, fingerprint(exp, fp["budget"]))
    return _REPRODUCED[key]


def compare(exp: Experiment, folder: Path, fp: dict[str, Any], live: Arrays) -> tuple[str, str]:
    """A fingerprint rerun against the stored one: bit for bit where one was recorded on this
    machine's arithmetic, else within the experiment's tolerances of the stored values.
    Returns (how it was compared, why it differs: "" when it does not)."""
    here = arithmetic()
    for record in fp["records"]:
        if record["arithmetic"] == here:
            kept = record["arrays"]
            now = hashes(live)
            differ = sorted(k for k in kept.keys() | now.keys() if kept.get(k) != now.get(k))
            why = (
                f"its behaviour changed: today's code does not reproduce the stored fingerprint "
                f"(the reduced budget on one CPU thread, bit for bit on this arithmetic) in "
                f"{len(differ)} array(s), first {differ[0]!r}"
                if differ
                else ""
            )
            return "bit for bit", why
    path = folder / FINGERPRINT_VALUES
    if not path.exists():
        return "", (
            "its fingerprint was recorded on other arithmetics only, without values to compare "
            f"within tolerances (record them with `python -m guide.stored fingerprint "
            f"{exp.name}` where the stored bits are reproduced)"
        )
    with np.load(path) as data:
        kept = {k: data[k] for k in data.files}
    found = deviations(kept, live, tolerances(exp))
    outside = sorted((k for k, v in found.items() if v > 1), key=lambda k: -found[k])
    why = (
        f"its behaviour changed: today's code does not reproduce the stored fingerprint (the "
        f"reduced budget on one CPU thread, on another arithmetic than the stored bits', so "
        f"within the experiment's tolerances) in {len(outside)} array(s), the worst "
        f"{outside[0]!r} at {found[outside[0]]:.3g} times its tolerance"
        if outside
        else ""
    )
    return "within its tolerances", why


def _may_record(prov: dict[str, Any], now: str) -> bool:
    """Whether today's code may record the stored run's behaviour: it made the run, or it
    reproduced the run's fingerprint."""
    confirmed = prov.get("fingerprint", {}).get("reproduced", [])
    return prov.get("code_hash") == now or any(r["code_hash"] == now for r in confirmed)


def store_fingerprint(name: str, *, root: Path | None = None) -> int:
    """Record the fingerprint of a stored full run on this machine's arithmetic; return the
    number of arrays it covers.

    Allowed for the code that made the run and for code whose hash [confirm][] recorded. The
    first record of a run also stores the values (``fingerprint.npz``), against which other
    arithmetics compare within tolerances; a record for an arithmetic already recorded is
    replaced.

    Raises
    ------
    StaleResults
        If no full run is stored, or it was made by other, unconfirmed code.
    """
    exp = experiment(name)
    folder = _folder(name, root)
    prov = _read_provenance(folder)
    now = code_hash(exp)
    if not prov or not _may_record(prov, now):
        raise StaleResults(
            f"experiment {name!r}: a fingerprint records the behaviour of the code that made "
            f"the stored full run, and the stored run is missing or was made by other code; "
            f"run it with `{exp.command}`"
        )
    budget = _jsonable(exp.reduced)
    old = prov.get("fingerprint", {})
    if old.get("budget", budget) != budget:
        raise StaleResults(
            f"experiment {name!r}: the reduced budget changed since its fingerprint was "
            f"recorded; rerun the full run with `{exp.command}`"
        )
    start = time.perf_counter()
    values = fingerprint(exp, budget)
    here = arithmetic()
    with _locked(folder):
        prov = _read_provenance(folder)
        fp = prov.setdefault("fingerprint", {"budget": budget, "records": []})
        if not (folder / FINGERPRINT_VALUES).exists():
            np.savez_compressed(folder / FINGERPRINT_VALUES, **values)  # type: ignore[arg-type]
        record = provenance(exp, "cpu", time.perf_counter() - start)
        record.update(threads=1, arithmetic=here, arrays=hashes(values))
        fp["records"] = [r for r in fp["records"] if r["arithmetic"] != here] + [record]
        _write_provenance(folder, prov)
    return len(values)


def confirm(name: str, *, root: Path | None = None) -> str:
    """Rerun the stored run's fingerprint with today's code and, if it is reproduced, record
    today's code hash as one that made the same numbers; return that hash.

    The record spares the rerun at every build, on every machine. ``tests/test_stored.py``
    reruns the fingerprint of every recorded hash.

    Raises
    ------
    StaleResults
        If no fingerprint is stored, or today's code does not reproduce it.
    """
    exp = experiment(name)
    folder = _folder(name, root)
    prov = _read_provenance(folder)
    now = code_hash(exp)
    if prov and prov["code_hash"] == now:
        return now  # the code that made the run
    how, why = _reproduced(exp, folder, prov, now) if prov else ("", "no full run is stored")
    if why:
        raise StaleResults(f"experiment {name!r}: {why}; refresh it with `{exp.command}`")
    with _locked(folder):
        prov = _read_provenance(folder)
        done = [r for r in prov["fingerprint"].get("reproduced", []) if r["code_hash"] != now]
        record = provenance(exp, "cpu", 0.0)
        keep = ("code_hash", "commit", "dirty", "torch", "python", "device", "finished")
        prov["fingerprint"]["reproduced"] = [*done, {**{k: record[k] for k in keep}, "how": how}]
        _write_provenance(folder, prov)
    return now


def _write_provenance(folder: Path, prov: dict[str, Any]) -> None:
    tmp = folder / ".provenance.tmp.json"
    tmp.write_text(json.dumps(prov, indent=1) + "\n")
    tmp.replace(folder / "provenance.json")


def rerun(name: str, *, device: str = "cpu") -> dict[str, Arrays]:
    """Run experiment ``name`` at its reduced budget, every part, in this process."""
    exp = experiment(name)
    return {part: exp.run_part(part, exp.reduced, device) for part in exp.parts(exp.reduced)}


def verify(stored: Stored, live: dict[str, Arrays]) -> list[Check]:
    """Compare a live reduced run with the stored full run; raise if any check fails.

    Returns the checks (all passed), for the page to print.

    Raises
    ------
    Disagreement
        Listing every failed check.
    """
    checks = experiment(stored.name).agree(stored, live)
    if not checks:
        raise Disagreement(f"experiment {stored.name!r} declares no agreement checks")
    failed = [c for c in checks if not c.ok]
    if failed:
        lines = "\n".join(
            f"  {c.what}: stored {c.stored}, live {c.live} (required: {c.bound})" for c in failed
        )
        raise Disagreement(
            f"experiment {stored.name!r}: the reduced rerun disagrees with the stored full run "
            f"in {len(failed)} of {len(checks)} checks:\n{lines}\nIf the code changed on purpose,"
            f" refresh the stored run with `{COMMAND.format(name=stored.name)}`."
        )
    return checks


def checks_table(checks: Sequence[Check]) -> Table:
    """The agreement checks as a page shows them: what, stored, rerun now, required."""
    return Table(
        ["check", "stored", "rerun now", "required"],
        [[c.what, c.stored, c.live, c.bound] for c in checks],
    )


def close(what: str, stored: float, live: float, *, rtol: float, atol: float = 0.0) -> Check:
    """``live`` within ``atol + rtol * |stored|`` of ``stored`` (or both the same infinity)."""
    ok = stored == live or (
        math.isfinite(stored)
        and math.isfinite(live)
        and abs(live - stored) <= atol + rtol * abs(stored)
    )
    parts = [f"{100 * rtol:.2g}%" if rtol else "", f"{atol:g}" if atol else ""]
    bound = (
        "within " + " + ".join(p for p in parts if p) + " of stored" if rtol or atol else "equal"
    )
    return Check(what, f"{stored:.4g}", f"{live:.4g}", bound, bool(ok))


def same_direction(what: str, stored: float, live: float) -> Check:
    """``stored`` and ``live`` have the same sign (a verdict that points the same way)."""
    ok = math.isfinite(stored) and math.isfinite(live) and np.sign(stored) == np.sign(live)
    return Check(what, f"{stored:+.3g}", f"{live:+.3g}", "same sign", bool(ok))


# --- running and storing ---------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    """Budgets as JSON stores them (tuples become lists)."""
    result: Any = json.loads(json.dumps(value))
    return result


ROOT = Path(__file__).parents[3]  # the checkout, where this is one


def git(*args: str) -> str:
    try:
        out = subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return ""
    return out.stdout.strip()


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def device_name(device: str) -> str:
    if device.startswith("cuda"):
        return f"cuda: {torch.cuda.get_device_name(torch.device(device))}"
    return f"cpu: {_cpu_model()}, {os.cpu_count()} core(s)"


def dirty() -> bool:
    """Uncommitted changes to the code (the results stored so far are not code)."""
    if not RESULTS.is_relative_to(ROOT):  # an installed package: no checkout to ask
        return False
    code = ("src", "guide/src", f":!{RESULTS.relative_to(ROOT)}")
    return bool(git("status", "--porcelain", "--", *code))


def provenance(exp: Experiment, device: str, seconds: float) -> dict[str, Any]:
    """The record stored with one part of a full run."""
    return {
        "commit": git("rev-parse", "HEAD") or "unknown",
        "dirty": dirty(),
        "code_hash": code_hash(exp),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "device": device_name(device),
        "threads": torch.get_num_threads(),
        "seconds": round(seconds, 1),
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def run(
    name: str,
    *,
    device: str = "cpu",
    parts: Sequence[str] | None = None,
    root: Path | None = None,
    log: Callable[[str], object] = print,
) -> Path:
    """Run experiment ``name`` at its full budget and store it, part by part.

    Parts already stored by the same code with the same budget are kept, so an interrupted run
    resumes where it stopped. ``parts`` runs only those (several processes, each with its own
    parts, can fill one experiment on several cores or devices). Returns the results folder.
    """
    exp = experiment(name)
    folder = _folder(name, root)
    folder.mkdir(parents=True, exist_ok=True)
    now = code_hash(exp)
    budget = _jsonable(exp.full)
    every = exp.parts(exp.full)
    unknown = sorted(set(parts or ()) - set(every))
    if unknown:
        raise ValueError(f"parts: {name} has no part {unknown}; its parts are {every}")

    def current() -> dict[str, Any]:
        prov = _read_provenance(folder)
        if prov.get("code_hash") != now or prov.get("budget") != budget:
            return {"experiment": name, "code_hash": now, "budget": budget, "parts": {}}
        return prov

    todo = [p for p in (parts or every) if p not in current()["parts"]]
    log(f"{name}: {len(todo)} of {len(every)} parts to run (code {now[:12]})")
    for part in todo:
        start = time.perf_counter()
        arrays = exp.run_part(part, exp.full, device)
        seconds = time.perf_counter() - start
        tmp = folder / f".{part}.tmp.npz"
        np.savez_compressed(tmp, **{k: np.asarray(v) for k, v in arrays.items()})  # type: ignore[arg-type]
        tmp.replace(folder / f"{part}.npz")
        with _locked(folder):  # re-read: another process may have stored a part meanwhile
            prov = current()
            prov["parts"][part] = provenance(exp, device, seconds)
            _write_provenance(folder, prov)
        log(f"{name}: part {part} stored ({seconds:.0f} s)")
    prov = current()
    if parts is None:  # a whole run: drop arrays that no current part owns
        for stale in folder.glob("*.npz"):
            if stale.stem not in prov["parts"] and stale.name != FINGERPRINT_VALUES:
                stale.unlink()
    if all(p in prov["parts"] for p in every) and "fingerprint" not in prov:
        (folder / FINGERPRINT_VALUES).unlink(missing_ok=True)  # an older run's
        store_fingerprint(name, root=root)
        log(f"{name}: fingerprint stored")
    return folder


@contextlib.contextmanager
def _locked(folder: Path) -> Iterator[None]:
    """An exclusive lock on ``folder`` between processes (POSIX ``flock`` on the directory)."""
    fd = os.open(folder, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # releases the lock


# --- the spread of a fingerprint across arithmetics -------------------------------------------

#: Arithmetics one machine can reach, as (label, environment, threads): each changes the bits of
#: the same run (the thread count splits reductions differently); together they stand in for
#: other CPUs when a tolerance is set.
ARITHMETICS: tuple[tuple[str, dict[str, str], int], ...] = (
    ("default, 1 thread", {}, 1),
    ("MKL_CBWR=COMPATIBLE", {"MKL_CBWR": "COMPATIBLE"}, 1),
    ("ATEN_CPU_CAPABILITY=avx2", {"ATEN_CPU_CAPABILITY": "avx2"}, 1),
    ("ATEN_CPU_CAPABILITY=default", {"ATEN_CPU_CAPABILITY": "default"}, 1),
    ("2 threads", {}, 2),
    ("3 threads", {}, 3),
)
#: A planted change of behaviour that every tolerance must catch: each Adam update (the
#: library's stacked trainer and ``torch.optim``'s single-tensor AdamW both take it with
#: ``Tensor.addcdiv_``) made this much larger.
PLANTED = 1.01


@contextlib.contextmanager
def planted_change() -> Iterator[None]:
    """Every ``Tensor.addcdiv_`` step [PLANTED][] times larger, inside the block."""
    real = torch.Tensor.addcdiv_

    def larger(self: torch.Tensor, *args: Any, value: float = 1.0, **kwargs: Any) -> torch.Tensor:
        return real(self, *args, value=value * PLANTED, **kwargs)

    torch.Tensor.addcdiv_ = larger  # type: ignore[method-assign,assignment]
    try:
        yield
    finally:
        torch.Tensor.addcdiv_ = real  # type: ignore[method-assign]


def _values(name: str, threads: int, plant: bool) -> Arrays:
    """The fingerprint's arrays at ``threads`` threads, with or without the planted change."""
    exp = experiment(name)
    torch.set_num_threads(threads)
    with planted_change() if plant else contextlib.nullcontext():
        return {
            f"{part}/{key}": np.asarray(value)
            for part in exp.parts(exp.reduced)
            for key, value in exp.run_part(part, exp.reduced, "cpu").items()
        }


def _difference(key: str, kept: Arrays, runs: Mapping[tuple[str, bool], Arrays]) -> str:
    """The largest |difference| of one array over the plain reruns, absolute and relative to
    the stored value (where that is not 0), as text."""
    if kept[key].dtype.kind not in "fc":
        return "-"
    ref = kept[key].astype(np.float64)
    absolute = relative = 0.0
    for (_, plant), r in runs.items():
        if plant or r[key].shape != ref.shape:
            continue
        diff = np.abs(r[key].astype(np.float64) - ref)
        ok = np.isfinite(diff)
        absolute = max(absolute, float(np.max(diff[ok], initial=0.0)))
        scaled = diff[ok & (ref != 0)] / np.abs(ref[ok & (ref != 0)])
        relative = max(relative, float(np.max(scaled, initial=0.0)))
    return f"{absolute:.3g} (relative {relative:.3g})"


def spread(name: str, *, keep: Path | None = None, log: Callable[[str], object] = print) -> bool:
    """Rerun experiment ``name``'s fingerprint under each of [ARITHMETICS][], as it is and with
    the [planted_change][], each in a fresh process; print how far each lies from the stored
    values, in units of the experiment's tolerances. Returns whether every plain rerun lies
    within them and every planted one outside. With ``keep``, each rerun's values are kept
    there and reused by the next call (to try other tolerances on the same reruns)."""
    import tempfile

    exp = experiment(name)
    tol = tolerances(exp)
    folder = _folder(name, None)
    runs: dict[tuple[str, bool], Arrays] = {}
    with tempfile.TemporaryDirectory() as tmp:
        where = keep or Path(tmp)
        where.mkdir(parents=True, exist_ok=True)
        for label, env, threads in ARITHMETICS:
            for plant in (False, True):
                out = where / f"{name}-{len(runs)}.npz"
                cmd = [sys.executable, "-m", "guide.stored", "values", name]
                cmd += ["--threads", str(threads), "--out", str(out), *(["--plant"] * plant)]
                if out.exists() or subprocess.run(cmd, env={**os.environ, **env}).returncode == 0:
                    with np.load(out) as data:
                        runs[(label, plant)] = {k: data[k] for k in data.files}
                else:
                    log(f"{name}: {label} failed; left out")
    ref_path = folder / FINGERPRINT_VALUES
    if ref_path.exists():
        with np.load(ref_path) as data:
            kept = {k: data[k] for k in data.files}
        against = "the stored values"
    else:
        kept = runs[(ARITHMETICS[0][0], False)]
        against = "this machine's default arithmetic (no values are stored)"
    log(f"{name}: deviation from {against}, in units of the tolerance (<= 1 is within)")
    ok = True
    width = max(len(k) for k in kept)
    plain_runs = [r for (_, p), r in runs.items() if not p]
    planted_runs = [r for (_, p), r in runs.items() if p]
    for key in sorted(kept):
        t = tolerance_of(key, tol)
        plain = [deviations({key: kept[key]}, {key: r[key]}, tol)[key] for r in plain_runs]
        planted = [deviations({key: kept[key]}, {key: r[key]}, tol)[key] for r in planted_runs]
        first = "" if t.first is None else f" first {t.first}"
        log(
            f"  {key:<{width}}  rtol {t.rtol:<6g} atol {t.atol:<6g}{first}: arithmetics worst "
            f"{max(plain):.3g}, planted least {min(planted):.3g}; largest difference "
            f"{_difference(key, kept, runs)}"
        )
    log(f"{name}: per arithmetic, the worst array (plain | with every Adam step x{PLANTED:g})")
    for label, _, _ in ARITHMETICS:
        row = []
        for plant in (False, True):
            if (label, plant) not in runs:
                row.append("not run")
                continue
            found = deviations(kept, runs[(label, plant)], tol)
            worst = max(found, key=lambda k: found[k])
            if plant:
                ok &= found[worst] > 1  # the planted change must show somewhere
            else:
                ok &= found[worst] <= 1
            row.append(f"{found[worst]:.3g} ({worst})")
        log(f"  {label:<28} {row[0]} | {row[1]}")
    log(f"{name}: {'tolerances hold' if ok else 'TOLERANCES DO NOT HOLD'}")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m guide.stored",
        description="Run the guide's full-budget experiments and store them with provenance.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    run_p = sub.add_parser("run", help="run experiments (default: every missing or stale one)")
    run_p.add_argument("names", nargs="*", help="experiments to run")
    run_p.add_argument("--device", default="cpu", help="torch device, e.g. cpu or cuda")
    run_p.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    run_p.add_argument(
        "--parts", nargs="+", default=None, help="only these parts (of one experiment)"
    )
    sub.add_parser("status", help="list the experiments and the state of their stored runs")
    print_p = sub.add_parser(
        "fingerprint", help="store the fingerprint of stored runs made by today's code"
    )
    print_p.add_argument("names", nargs="+", help="experiments")
    confirm_p = sub.add_parser(
        "confirm", help="record today's code hash where it reproduces a run's fingerprint"
    )
    confirm_p.add_argument("names", nargs="+", help="experiments")
    spread_p = sub.add_parser(
        "spread",
        help="rerun the fingerprint under other arithmetics, and with a planted change, "
        "against the tolerances",
    )
    spread_p.add_argument("names", nargs="+", help="experiments")
    spread_p.add_argument("--keep", type=Path, help="keep the reruns' values here, and reuse them")
    values_p = sub.add_parser("values")  # one rerun of `spread`, in its own process
    values_p.add_argument("name")
    values_p.add_argument("--threads", type=int, required=True)
    values_p.add_argument("--out", type=Path, required=True)
    values_p.add_argument("--plant", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "values":
        arrays = _values(args.name, args.threads, args.plant)
        np.savez(args.out, **arrays)  # type: ignore[arg-type]
        return 0
    if args.command == "spread":
        return 0 if all([spread(name, keep=args.keep) for name in args.names]) else 1
    if args.command == "fingerprint":
        for name in args.names:
            print(f"{name}: fingerprint of {store_fingerprint(name)} arrays stored")
        return 0
    if args.command == "confirm":
        for name in args.names:
            print(f"{name}: code hash {confirm(name)[:12]} reproduces the stored fingerprint")
        return 0
    if args.command == "status":
        for name in names():
            try:
                stored = load(name)
                print(f"{name}: up to date\n{stored.summary()}")
            except StaleResults as err:
                print(f"{name}: {err}")
        return 0
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    chosen = args.names or [n for n in names() if not _is_current(n)]
    if args.parts and len(chosen) != 1:
        parser.error("--parts needs exactly one experiment name")
    for name in chosen:
        run(name, device=args.device, parts=args.parts)
    return 0


def _is_current(name: str) -> bool:
    try:
        load(name)
    except StaleResults:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
