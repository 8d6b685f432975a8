"""README's set-up timings, made from a clean-clone ``.ci/run`` instead of typed in.

``.ci/run`` writes each step's seconds, the commit and the machine to ``.ci/last-run.json``
(untracked): the two README commands cold, each creating its environments.
``python -m attnscale_tools.ci_timings warm``, run next in the same clone, times them again with the
environments in place and nothing changed, into the same file. ``python -m
attnscale_tools.ci_timings [that file]`` keeps a copy as ``.ci/timings.json`` (tracked: the
provenance of the numbers) and rewrites README's paragraph between the ``ci-timings`` markers from
it; ``tests/test_ci_timings.py`` checks that the README says what the copy holds.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from attnscale_tools import ROOT

STORED = ROOT / ".ci" / "timings.json"
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- ci-timings -->\n)(.*?)(<!-- /ci-timings -->)", re.S)
KEYS = {"commit", "date", "cpu", "machine", "cores", "avx512", "memory_gib", "seconds", "warm"}
STEPS = ("docs", "tests", "browser", "downloads", "lint", "arithmetic")
README_COMMANDS = ("docs", "tests")


def load(path: Path = STORED) -> dict[str, Any]:
    """A run's record, checked for the fields the paragraph uses."""
    run: dict[str, Any] = json.loads(path.read_text())
    missing = KEYS - set(run) | set(STEPS) - set(run.get("seconds", {}))
    missing |= {"warm " + k for k in README_COMMANDS if k not in run.get("warm", {})}
    if missing:
        raise ValueError(f"{path}: a .ci/run record needs {sorted(missing)}")
    return run


def _minutes(seconds: int) -> str:
    return f"{max(1, round(seconds / 60))} minute" + ("" if round(seconds / 60) <= 1 else "s")


def render(run: dict[str, Any]) -> str:
    """README's paragraph: how long the two commands took, cold, on what, and the whole run."""
    s, w = run["seconds"], run["warm"]
    machine = f"{run['cores']}-core {run['cpu']} ({run['machine']}"
    machine += ", AVX-512" if run["avx512"] else ""
    machine += f", {run['memory_gib']} GiB)"
    text = (
        f"Measured by `.ci/run` on a clean clone (commit {run['commit'][:7]}, {run['date']}) on a {machine}, "
        f"each creating its environments: `nox -s docs` took {_minutes(s['docs'])} and "
        f"`nox -s tests` {_minutes(s['tests'])}; run again with the environments in place and "
        f"nothing changed, {_minutes(w['docs'])} and {_minutes(w['tests'])}. The whole run, with "
        f"the browser, download, lint and second-arithmetic checks, took "
        f"{_minutes(sum(s[k] for k in STEPS))}."
    )
    return _wrap(text) + "\n"


def _wrap(text: str, width: int = 100) -> str:
    """Fill ``text`` to README's line width, never breaking inside a code span."""
    words = re.findall(r"`[^`]*`\S*|\S+", text)
    lines: list[str] = []
    for word in words:
        if lines and len(lines[-1]) + 1 + len(word) <= width:
            lines[-1] += " " + word
        else:
            lines.append(word)
    return "\n".join(lines)


def update(source: Path) -> None:
    """Keep ``source`` as the stored record and rewrite README's paragraph from it."""
    run = load(source)
    if source.resolve() != STORED.resolve():
        shutil.copyfile(source, STORED)
    readme = README.read_text()
    if not BLOCK.search(readme):
        raise ValueError(f"{README}: no <!-- ci-timings --> ... <!-- /ci-timings --> block")
    README.write_text(BLOCK.sub(lambda m: m[1] + render(run) + m[3], readme))


def time_warm(record: Path) -> None:
    """Time the README's two commands again in this clone, after ``.ci/run``, into ``record``."""
    run = json.loads(record.read_text())
    run["warm"] = {}
    for name in README_COMMANDS:
        start = time.monotonic()
        subprocess.run(["nox", "-s", name], cwd=ROOT, check=True)
        run["warm"][name] = round(time.monotonic() - start)
    record.write_text(json.dumps(run, indent=2))


if __name__ == "__main__":
    last = ROOT / ".ci" / "last-run.json"
    if sys.argv[1:] == ["warm"]:
        time_warm(last)
    else:
        update(Path(sys.argv[1]) if len(sys.argv) > 1 else last)
        print(f"README's timings are those of {STORED.relative_to(ROOT)}")
