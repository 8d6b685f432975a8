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


@pytest.mark.parametrize("script", EXAMPLES, ids=lambda p: f"{p.parent.name}/{p.stem}")
def test_example_has_a_plain_title(script: Path) -> None:
    """The title is a Markdown H1 without math: navigation and cards show it as raw text."""
    text = script.read_text()
    assert text.startswith('r"""'), "the first statement is a raw docstring"
    title = next(line for line in text[4:].splitlines() if line.strip())
    assert title.startswith("# "), f"first docstring line is not a '# ' title: {title!r}"
    assert "$" not in title, f"math in the title: {title!r}"
