"""Every gallery script runs top to bottom, as a reader would run the download."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[1]
EXAMPLES = sorted([*ROOT.glob("examples/*/plot_*.py"), *ROOT.glob("factcheck/plot_*.py")])


def test_examples_exist():
    assert EXAMPLES, "no gallery scripts found"


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_runs(script: Path, tmp_path: Path) -> None:
    env = os.environ | {"MPLBACKEND": "Agg", "MPLCONFIGDIR": str(tmp_path)}
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Traceback" not in result.stderr
