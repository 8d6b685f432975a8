"""MkDocs hooks for gallery pages: a "running this example" box, and a search boost."""

from __future__ import annotations

import re
from typing import Any

_TIME = re.compile(
    r"\*\*Total running time of the script:\*\*\s*\(\s*(\d+) minutes\s+([\d.]+) seconds\)"
)
_TITLE = re.compile(r"^# .*$", re.M)


def on_page_markdown(markdown: str, page: Any, **_: Any) -> str:
    src = page.file.src_uri
    if not re.fullmatch(r"generated/gallery/[^/]+/plot_\w+\.md", src):
        return markdown
    # The guide's pages explain a topic; rank them above API entries in site search.
    page.meta["search"] = {"boost": 4}
    found = _TIME.search(markdown)
    title = _TITLE.search(markdown)
    if not found or not title:
        raise ValueError(f"{src}: gallery page without a title or a running time")
    seconds = int(found.group(1)) * 60 + float(found.group(2))
    stem = src.rsplit("/", 1)[-1].removesuffix(".md")
    box = (
        '\n\n!!! info "Running this example"\n\n'
        f"    It ran in {seconds:.1f} s on the 2-core CPU that built this page. It needs only the\n"
        "    `attnscale` package and its dependencies (torch, numpy, matplotlib): download it as\n"
        f"    [`{stem}.py`](./{stem}.py) or [`{stem}.ipynb`](./{stem}.ipynb) and run it as is.\n"
    )
    return markdown[: title.end()] + box + markdown[title.end() :]
