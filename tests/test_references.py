"""Every paper cited anywhere on the site is listed on the references page."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[1]
ARXIV = re.compile(r"arXiv:(\d{4}\.\d{4,5})")


def test_every_arxiv_citation_is_on_the_references_page():
    listed = set(ARXIV.findall((ROOT / "docs" / "references.md").read_text()))
    sources = [
        *ROOT.glob("examples/**/*.py"),
        *ROOT.glob("factcheck/*.py"),
        *ROOT.glob("src/attnscale/*.py"),
        *(p for p in ROOT.glob("docs/**/*.md") if "generated" not in p.parts),
    ]
    cited = {(m, p.relative_to(ROOT)) for p in sources for m in ARXIV.findall(p.read_text())}
    missing = sorted(f"arXiv:{m} (cited in {p})" for m, p in cited if m not in listed)
    assert not missing, f"add these to docs/references.md: {missing}"
    assert len(listed) >= 10
