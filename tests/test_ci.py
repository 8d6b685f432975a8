"""GitHub's workflow runs what .ci/run runs: the same nox sessions, the later ones on the site
the docs job built; and no command line carries the test suite's configuration (which tests
are collected, where the docstrings' examples run)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).parents[1]
CI_RUN = ROOT / ".ci" / "run"
WORKFLOWS = ROOT / ".github" / "workflows"
CI = WORKFLOWS / "ci.yml"
#: The sessions that read the build the docs session leaves behind.
READ_THE_BUILD = {"tests", "browser", "downloads", "arithmetic"}
SESSION = re.compile(r"\bnox\s+-s\s+([\w-]+)")


def _shell_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if not line.lstrip().startswith("#")]


def _workflow(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load(path.read_text())
    return data


def _steps(job: dict[str, Any]) -> list[dict[str, Any]]:
    steps: list[dict[str, Any]] = job.get("steps", [])
    return steps


def _sessions(commands: list[str]) -> list[str]:
    return [name for line in commands for name in SESSION.findall(line)]


def _job_sessions(job: dict[str, Any]) -> list[str]:
    return _sessions(
        [line for step in _steps(job) for line in str(step.get("run", "")).split("\n")]
    )


def test_sessions_are_found() -> None:
    assert _sessions(["python3 -m pip install nox && nox -s docs", "nox  -s lint -- x"]) == [
        "docs",
        "lint",
    ]


def test_the_workflow_runs_the_sessions_of_ci_run() -> None:
    local = set(_sessions(_shell_lines(CI_RUN.read_text())))
    jobs = _workflow(CI)["jobs"]
    github = {s for job in jobs.values() for s in _job_sessions(job)}
    assert {"docs", "tests", "browser", "downloads", "lint", "arithmetic"} <= local
    assert github == local, (
        f"only in .ci/run: {sorted(local - github)}; only in ci.yml: {sorted(github - local)}"
    )


def test_every_session_named_exists() -> None:
    tree = ast.parse((ROOT / "noxfile.py").read_text())
    defined = {
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef)
        and any("session" in ast.unparse(d) for d in node.decorator_list)
    }
    named = set(_sessions(_shell_lines(CI_RUN.read_text())))
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for job in _workflow(path)["jobs"].values():
            named |= set(_job_sessions(job))
    assert named and named <= defined, sorted(named - defined)


def test_the_jobs_after_the_build_read_the_build() -> None:
    """The docs job uploads what the later sessions read (the site, the gallery's pages, the
    kept figures, the Chinese tree and the explorer's vectors under build/); each job that runs
    one of them downloads it first, so the tests that need a build run there, not skip."""
    jobs = _workflow(CI)["jobs"]
    (upload,) = [
        s
        for s in _steps(jobs["docs"])
        if str(s.get("uses", "")).startswith("actions/upload-artifact")
    ]
    assert set(upload["with"]["path"].split()) == {"site/", "docs/generated/", "build/"}
    for name, job in jobs.items():
        if READ_THE_BUILD & set(_job_sessions(job)):
            assert "docs" in job.get("needs", []), name
            downloads = [
                s
                for s in _steps(job)
                if str(s.get("uses", "")).startswith("actions/download-artifact")
            ]
            assert [d["with"]["name"] for d in downloads] == [upload["with"]["name"]], name
            runs = [i for i, s in enumerate(_steps(job)) if "run" in s]
            assert _steps(job).index(downloads[0]) < runs[-1], f"{name}: download after the run"


def test_every_action_is_pinned() -> None:
    for path in sorted(WORKFLOWS.glob("*.yml")):
        for name, job in _workflow(path)["jobs"].items():
            for step in _steps(job):
                uses = step.get("uses")
                assert uses is None or re.search(r"@(v\d+|release/v\d+)$", uses), (path, name, uses)


def test_no_command_line_configures_the_test_suite() -> None:
    """What pytest collects is tests/conftest.py's (``collect_ignore``), and the docstrings'
    examples run once, in tests/test_snippets.py: no command line adds ``--ignore`` or
    ``--doctest-modules``, so that no two places disagree."""
    texts = {"noxfile.py": (ROOT / "noxfile.py").read_text(), ".ci/run": CI_RUN.read_text()}
    texts |= {p.name: p.read_text() for p in WORKFLOWS.glob("*.yml")}
    for name, text in texts.items():
        assert "--ignore" not in text and "--doctest" not in text, name
    assert not (ROOT / "src" / "conftest.py").exists(), "a doctest set-up nothing runs"


def test_the_ignored_folders_exist() -> None:
    """Each folder tests/conftest.py leaves out holds tests (a renamed one would be collected)."""
    tree = ast.parse((ROOT / "tests" / "conftest.py").read_text())
    (ignored,) = [
        ast.literal_eval(node.value)
        for node in tree.body
        if isinstance(node, ast.Assign) and ast.unparse(node.targets[0]) == "collect_ignore"
    ]
    assert ignored == ["site", "downloads"]
    for folder in ignored:
        assert list((ROOT / "tests" / folder).glob("test_*.py")), folder


def test_lint_and_pre_commit_run_one_ruff() -> None:
    """nox -s lint installs the ruff release the pre-commit hook runs: an open range would
    take a newer release, whose formatting fails a clean clone's lint the day it comes out."""
    noxfile = (ROOT / "noxfile.py").read_text()
    pre_commit = yaml.safe_load((ROOT / ".pre-commit-config.yaml").read_text())
    (rev,) = [r["rev"] for r in pre_commit["repos"] if r["repo"].endswith("ruff-pre-commit")]
    assert re.findall(r'"ruff==([\d.]+)"', noxfile) == [rev.lstrip("v")]


def test_dependabot_watches_every_manifest() -> None:
    """Each pyproject.toml of the three distributions, and package.json, has its updates."""
    config = yaml.safe_load((ROOT / ".github" / "dependabot.yml").read_text())
    watched = {(u["package-ecosystem"], u["directory"].strip("/")) for u in config["updates"]}
    manifests = (
        {("pip", str(p.parent.relative_to(ROOT)).strip(".")) for p in ROOT.glob("*/pyproject.toml")}
        | {("pip", "")}
        | {("npm", "")}
    )
    assert manifests <= watched, sorted(manifests - watched)
