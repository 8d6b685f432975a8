"""Every paper cited anywhere on the site is listed on the references page."""

import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[1]
ARXIV = re.compile(r"arXiv:(\d{4}\.\d{4,5})")


def test_every_arxiv_citation_is_on_the_references_page():
    listed = set(ARXIV.findall((ROOT / "docs" / "references.md").read_text()))
    sources = [
        *ROOT.glob("examples/**/*.py"),
        *ROOT.glob("factcheck/*.py"),
        *ROOT.glob("src/attnscale/**/*.py"),
        *(p for p in ROOT.glob("docs/**/*.md") if "generated" not in p.parts),
    ]
    cited = {(m, p.relative_to(ROOT)) for p in sources for m in ARXIV.findall(p.read_text())}
    missing = sorted(f"arXiv:{m} (cited in {p})" for m, p in cited if m not in listed)
    assert not missing, f"add these to docs/references.md: {missing}"
    assert len(listed) >= 10


# a guide page as the library writes it: "05_debugging/" or "01_variance/plot_01_variance_growth/"
PAGE = re.compile(r"\"(0\d_[a-z_]+)/(plot_\w+/)?\"")


def test_every_guide_link_in_the_library_points_at_an_example():
    from attnscale._monitor.diagnosis import GUIDE_PAGES
    from attnscale._monitor.report import GUIDE_URL

    section = GUIDE_URL.rstrip("/").rsplit("/", 1)[-1]
    links = [(section, page) for page in GUIDE_PAGES.values()]
    for source in ROOT.glob("src/attnscale/**/*.py"):
        links += [(folder, page) for folder, page in PAGE.findall(source.read_text())]
    assert len(links) > len(GUIDE_PAGES), "the fact-check's links were not found"
    for folder, page in links:
        target = ROOT / "examples" / folder
        if page:
            target = target / f"{page.rstrip('/')}.py"
        assert target.exists(), f"guide link {folder}/{page} has no example at {target}"


def test_the_guide_url_is_written_once(monkeypatch) -> None:
    """The monitor links to the address the package declares (pyproject.toml's Documentation
    URL), read from the metadata or, imported from a source tree, from pyproject.toml (an
    installed wheel without metadata has none); both MkDocs configurations publish there, and the citations point there."""
    import importlib.metadata

    from attnscale._monitor import report

    with (ROOT / "pyproject.toml").open("rb") as f:
        url = tomllib.load(f)["project"]["urls"]["Documentation"]
    assert url and report.GUIDE_URL.startswith(url)

    def not_installed(name: str) -> None:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "metadata", not_installed)
    from_source = Path(report.__file__).resolve().is_relative_to(ROOT / "src")
    assert report._documentation_url() == (url if from_source else "")
    for config, path in (("mkdocs.yml", ""), ("mkdocs.zh.yml", "zh/")):
        site_url = re.search(r"^site_url: (.+)$", (ROOT / config).read_text(), re.M)
        assert site_url and site_url[1] == url + path, config
    # and the citations point there
    assert f"url    = {{{url}}}" in (ROOT / "docs" / "references.md").read_text()
    assert f"url: {url}\n" in (ROOT / "CITATION.cff").read_text()
