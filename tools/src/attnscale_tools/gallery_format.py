"""What the build reads of mkdocs-gallery's output, in one place.

mkdocs-gallery turns each ``examples/**/plot_*.py`` (and ``factcheck/plot_*.py``) into a page
under ``docs/generated/``, with its figures, its printed output, a timing table per gallery and
a checksum of the script it ran. None of this is a documented interface, so a new release may
change it: ``tests/test_gallery_format.py`` checks every pattern here against the built output
and fails on a release other than ``VERSION`` until someone has looked again.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

#: The mkdocs-gallery release (major.minor) these patterns were read from.
VERSION = "0.10"

#: A text cell of a gallery script: its separator line (``# %%``, or a line of 20 or more #)
#: and the comment lines under it.
SCRIPT_CELL = re.compile(
    r"(?P<header_line>^#{20,}.*|^# ?%%.*)\s(?P<text_content>(?:^#.*\s?)*)", re.M
)

#: The fence that opens what an example printed (marked as shell code).
OUTPUT_FENCE = "```{.shell .mkd-glr-script-out-disp }"
#: What an example printed, on its page: the opening fence, the text, the closing fence.
OUTPUT_BLOCK = re.compile(rf"({re.escape(OUTPUT_FENCE)}\n)(.*?)(^```)", re.S | re.M)

#: The "download the full example code" note that opens every example page: its title (when
#: it has one) and its indented body.
DOWNLOAD_NOTE = re.compile(
    r'^!!! note(?: "([^"]*)")?\n\n((?:    .*#download_links.*\n(?:    .*\n)*))', re.M
)

#: The line under every example page with its running time: minutes, seconds.
RUNNING_TIME = re.compile(
    r"\*\*Total running time of the script:\*\*\s*\(\s*(\d+) minutes\s+([\d.]+) seconds\)"
)

#: A card of a gallery's index page: the card's inside, and the page it links to.
CARD = re.compile(
    r'<div class="mkd-glr-thumbcontainer" tooltip="[^"]*">(?P<body>.*?href="(?P<href>[^"]+)".*?)</div>',
    re.S,
)

#: Each gallery's table of run times, in its output folder.
TIMING_TABLE = "mg_execution_times.md"
#: That table's heading: the total time, the gallery's folder.
TIMING_HEADING = re.compile(
    r"# Computation times\n\n\*\*(.*?)\*\* total execution time for \*\*(.*?)\*\* files:"
)
#: A row of it: the example's name and its time, ``[mm:]ss.ss``.
TIMING_ROW = re.compile(r"\[(plot_\w+)\]\(.*?\|\s*([\d:.]+)\s*\|")

#: The gallery's log line that says how many scripts it ran.
EXECUTED = re.compile(r"executed (\d+) out of")

#: A figure an example saved, in its gallery's ``images/`` folder.
IMAGE = re.compile(r"mkd_glr_(?P<script>\w+)_(?P<number>\d{3})\.png")


def images(page: Path) -> list[Path]:
    """The figures of the example whose generated page (or script copy) is ``page``."""
    return sorted(page.parent.glob(f"images/mkd_glr_{page.stem}_[0-9][0-9][0-9].png"))


def thumbnail(image: Path) -> Path | None:
    """The gallery card's thumbnail made from ``image``, the example's first figure (the
    default; no example here picks another); None for another figure."""
    found = IMAGE.fullmatch(image.name)
    if not found or found["number"] != "001":
        return None
    return image.parent / "thumb" / f"mkd_glr_{found['script']}_thumb.png"


def card_thumbnail(page: Path) -> Path:
    """The gallery card's thumbnail of the example whose generated page is ``page``."""
    return page.parent / "images" / "thumb" / f"mkd_glr_{page.stem}_thumb.png"


def checksums(generated: Path) -> list[Path]:
    """The ``<script>.py.md5`` files: the checksum of the script each page was made from."""
    return sorted(generated.glob("**/*.py.md5"))


def script_md5(path: Path) -> str | None:
    """The gallery's checksum of a script (text mode, universal newlines); None if missing."""
    if not path.exists():
        return None
    text = path.read_text(errors="surrogateescape")
    return hashlib.md5(text.encode(errors="surrogateescape")).hexdigest()


# --- What the Chinese edition's checks, the build comparison and the browser tests read ---------

#: A code cell of an example page: the opening fence, the code, the closing fence.
CODE_BLOCK = re.compile(r"(```\{\.python \}\n)(.*?)(^```)", re.S | re.M)

#: The whole line with an example's running time, whatever language its number is in.
RUNNING_TIME_LINE = re.compile(r"\*\*Total running time of the script:\*\*.*")

#: A download button under an example page (the ``.py``, the ``.ipynb``) and under a gallery
#: (the zips): its Font Awesome icon and label, its target, its Material button classes.
DOWNLOAD_BUTTON = re.compile(r"\[:fontawesome[^\]]*\]\([^)]*\)(\{[^}]*\})?")

#: The gallery's name, as its pages print it (the signature line under each page).
GENERATOR = "mkdocs-gallery"

#: A figure of an example page, with its alt text (which may hold "]").
FIGURE_ALT = re.compile(r"^!\[(?P<alt>.*?)\]\(\./images/", re.M)

#: The Material for MkDocs release (major) whose markup the browser tests drive.
MATERIAL_VERSION = "9"
#: Material's search: what opens it, its input box, a result's link.
SEARCH_OPEN = "label.md-search__icon[for=__search], .md-search__input"
SEARCH_INPUT = "input.md-search__input"
SEARCH_RESULT_LINK = ".md-search-result__item a"
#: Material's language selector in the header, and the class of its links (one per
#: language, with ``hreflang``).
LANGUAGE_MENU = ".md-header__option .md-select"
LANGUAGE_LINK = "md-select__link"

#: The gallery's own words on its pages, which the Chinese edition translates (i18n.tree):
#: the opening of every example page's download note and its text,
NOTE_OPENING = "!!! note\n\n    Click"
NOTE_TEXT = "Click [here](#download_links)\n    to download the full example code"
#: the labels of an example's download buttons and of a gallery's "download all" buttons,
DOWNLOAD_PYTHON = "Download Python source code:"
DOWNLOAD_NOTEBOOK = "Download Jupyter notebook:"
DOWNLOAD_ALL_PYTHON = "Download all examples in Python source code:"
DOWNLOAD_ALL_NOTEBOOKS = "Download all examples in Jupyter notebooks:"
#: the label over what an example printed,
OUTPUT_LABEL = "\nOut:\n{: .mkd-glr-script-out }"
#: and the signature under every page.
SIGNATURE = "[Gallery generated by mkdocs-gallery]"
#: A gallery card's opening tag, with its tooltip.
CARD_OPENING = '<div class="mkd-glr-thumbcontainer" tooltip="{tooltip}">'
