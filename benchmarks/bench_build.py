"""Time ``nox -s docs``: a cold build, a rebuild with nothing changed, and one after an edit.

Targets: a cold build (environment already created, every example executed) in at most 150 s,
a rebuild with nothing changed in at most 15 s. Each row also says how many examples the build
executed, against what it should: all of them when cold, none when nothing changed, exactly the
edited one after an edit and again when the edit is undone, and once more when the original
comes back after a build in which the example failed (a failed result is never reused). The
edits append a line to one example, which is restored at the end.

Run from anywhere with ``python benchmarks/bench_build.py`` (needs ``nox`` on the PATH and the
build's package, ``pip install -e ./tools``: ``nox -s bench`` has both); it rebuilds ``site/``
and ``docs/generated/`` in place.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

from attnscale_tools import ROOT, gallery_format

GENERATED = ROOT / "docs" / "generated"
EDITED = ROOT / "examples" / "02_softmax" / "plot_01_shift_vs_scale.py"
EXAMPLES = sorted(ROOT.glob("examples/*/plot_*.py")) + sorted(ROOT.glob("factcheck/plot_*.py"))
TARGETS = {"cold": 150.0, "nothing changed": 15.0}


def build(nox: str, *, fails: bool = False) -> tuple[float, int]:
    """Run ``nox -s docs``; return its wall time and how many examples it executed."""
    start = time.perf_counter()
    proc = subprocess.run([nox, "-s", "docs"], cwd=ROOT, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    log = proc.stdout + proc.stderr
    if bool(proc.returncode) != fails:
        sys.exit(f"nox -s docs {'passed' if fails else 'failed'}, unexpectedly:\n{log[-3000:]}")
    found = gallery_format.EXECUTED.search(log)
    return seconds, int(found.group(1)) if found else 0


def main() -> None:
    nox = shutil.which("nox")
    if nox is None:
        sys.exit("nox is not on the PATH: python3 -m pip install nox")
    print(f"load average: {os.getloadavg()[0]:.2f} (1 min), {len(EXAMPLES)} examples")
    build(nox)  # creates the environment and vendors the assets; not timed
    original = EDITED.read_text()
    rows = []
    shutil.rmtree(GENERATED)
    rows.append(("cold", *build(nox), len(EXAMPLES)))
    rows.append(("nothing changed", *build(nox), 0))
    try:
        # a statement that does nothing: a comment would need a Chinese translation
        EDITED.write_text(original + "\npass\n")
        rows.append((f"{EDITED.name} edited", *build(nox), 1))
        EDITED.write_text(original)
        rows.append((f"{EDITED.name} restored", *build(nox), 1))
        # The same content after a failed build must run again, not reuse the output.
        EDITED.write_text(original + "\nraise RuntimeError('a failing example')\n")
        build(nox, fails=True)
    finally:
        EDITED.write_text(original)
    rows.append((f"{EDITED.name} restored after a failed build", *build(nox), 1))

    print("| build | seconds | target | examples executed | expected |")
    print("|---|---|---|---|---|")
    wrong = []
    for label, seconds, executed, expected in rows:
        target = TARGETS.get(label)
        verdict = "" if target is None else (" (met)" if seconds <= target else " (MISSED)")
        print(
            f"| {label} | {seconds:.1f} | {'-' if target is None else f'<= {target:.0f}'}{verdict} "
            f"| {executed} | {expected} |"
        )
        if executed != expected:
            wrong.append(label)
    if wrong:
        sys.exit(f"the build re-ran the wrong examples: {', '.join(wrong)}")


main()
