"""What the README tells a new user agrees with the files it describes: the torch release the
sessions pin, the two set-up commands CI runs verbatim, the documentation address, the
screenshot and the licence. (Its Python snippets run in test_snippets.py.)"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
COMMANDS = [
    "python3 -m pip install nox && nox -s docs",
    "python3 -m pip install nox && nox -s tests",
]


def _pinned_torch() -> str:
    found = re.search(r'^TORCH = "torch==([\w.+]+)"$', (ROOT / "noxfile.py").read_text(), re.M)
    assert found, 'noxfile.py no longer pins torch as TORCH = "torch==..."'
    return found.group(1)


def test_the_tested_torch_release_is_the_one_nox_pins() -> None:
    pinned = _pinned_torch()
    tested = re.findall(r"[Tt]ested with torch ([\w.+]+?)[,.]?\s", README)
    assert tested, "the README no longer says which torch release it is tested with"
    assert set(tested) == {pinned}, f"README: tested with torch {tested}, noxfile.py pins {pinned}"
    pins = re.findall(r"torch==([\w.+]+)", README)
    assert set(pins) <= {pinned}, f"README pins torch {pins}, noxfile.py {pinned}"


def test_the_set_up_commands_are_the_ones_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    for command in COMMANDS:
        assert re.search(rf"^{re.escape(command)}\s+#", README, re.M), command
        assert command in ci, f".ci/run no longer runs {command!r} on a line of its own"


def test_the_quick_start_clones_installs_and_links_the_site() -> None:
    start = README.index("## Quick start")
    quick = README[start : README.index("\n## ", start + 1)]
    for step in (
        "git clone https://",
        "cd attnscale",
        "--index-url",
        'pip install -e ".[plot,hf]"',
    ):
        assert step in quick, f"the quick start lost {step!r}"
    site = PYPROJECT["project"]["urls"]["Documentation"]
    assert f"]({site})" in README, f"the README does not link the documentation at {site}"


def test_the_screenshot_is_a_small_png_in_the_repository() -> None:
    images = re.findall(r"!\[[^\]]+\]\(([^)\s]+)\)", README)
    assert images, "the README shows no screenshot"
    for image in images:
        assert not image.startswith(("http:", "https:", "/")), f"{image}: not a relative path"
        path = ROOT / image
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", f"{image}: not a PNG"
        assert path.stat().st_size <= 200_000, f"{image}: {path.stat().st_size} bytes"


def test_the_licence_and_contributing_guide_it_links_exist() -> None:
    for target in re.findall(r"\]\((?!https?:)([^)#\s]+)\)", README):
        assert (ROOT / target).exists(), f"the README links {target}, which does not exist"
    project = PYPROJECT["project"]
    assert project["license"] == "MIT" and "LICENSE" in project["license-files"]
    assert (ROOT / "LICENSE").read_text(encoding="utf-8").startswith("MIT License")
