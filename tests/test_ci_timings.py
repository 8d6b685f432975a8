"""README's set-up timings are those of a stored clean-clone .ci/run (issue 43: no measured number
typed into the README), and .ci/run records what the paragraph needs."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from attnscale_tools import ROOT, ci_timings


def test_the_readme_says_what_the_stored_run_measured() -> None:
    block = ci_timings.BLOCK.search(ci_timings.README.read_text())
    assert block is not None, "README lost its <!-- ci-timings --> block"
    assert block[2] == ci_timings.render(ci_timings.load()), (
        "README's timings differ from .ci/timings.json: python -m attnscale_tools.ci_timings "
        ".ci/timings.json"
    )


def test_ci_run_times_the_steps_the_paragraph_names() -> None:
    named = re.findall(r"^step (\w+) ", (ROOT / ".ci" / "run").read_text(), re.M)
    assert tuple(named) == ci_timings.STEPS


def test_a_record_without_a_step_is_refused(tmp_path: Path) -> None:
    run = json.loads(ci_timings.STORED.read_text())
    del run["seconds"]["tests"]
    (tmp_path / "run.json").write_text(json.dumps(run))
    with pytest.raises(ValueError, match="tests"):
        ci_timings.load(tmp_path / "run.json")


def test_the_paragraph_follows_the_record() -> None:
    run = ci_timings.load()
    run["seconds"] = dict.fromkeys(ci_timings.STEPS, 600)
    run["warm"] = dict.fromkeys(ci_timings.README_COMMANDS, 600)
    text = " ".join(ci_timings.render(run).split())
    assert "`nox -s docs` took 10 minutes and `nox -s tests` 10 minutes" in text
    assert "10 minutes and 10 minutes" in text and "took 60 minutes." in text
    assert all(len(line) <= 100 for line in ci_timings.render(run).splitlines())
    assert not any(line.count("`") % 2 for line in ci_timings.render(run).splitlines())
