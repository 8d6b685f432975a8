"""The steps of ``nox -s docs`` around the English build that read mkdocs-gallery's output: which
examples the gallery must rerun, and how long each one took.

    python -m attnscale_tools.gallery_cache invalidate KEY
    python -m attnscale_tools.gallery_cache times

They run in the docs session's environment, where this package is installed; the noxfile, which
runs in nox's own, imports none of the build's code.
"""

from __future__ import annotations

import shutil
import sys

from attnscale_tools import ROOT, figure_copies, gallery_format

GENERATED = ROOT / "docs" / "generated"


def invalidate(key: str) -> None:
    """Make mkdocs-gallery rerun every example whose cached output could be stale.

    The gallery reruns a script only when the script's own md5 changed. It does not know about
    the library or the installed packages, so a change in either one (``key``, computed by the
    docs session: the sources, the installed releases, the arithmetic settings) wipes the
    cache. A script also reruns when its page is missing, or when the gallery's copy of it
    differs from the source its md5 records: a run that failed or was interrupted leaves the new
    copy next to the old md5, and the outputs of that run must not be reused when the old source
    comes back. It reruns, too, when one of its figures has no copy for the Chinese edition to
    redraw (zh_figures).
    """
    stamp = GENERATED / ".environment"
    if not stamp.exists() or stamp.read_text() != key:
        shutil.rmtree(GENERATED, ignore_errors=True)
        shutil.rmtree(figure_copies.COPIES, ignore_errors=True)
        GENERATED.mkdir(parents=True)
        stamp.write_text(key)
    for md5 in gallery_format.checksums(GENERATED):  # every gallery: guide and fact-check
        copy = md5.with_suffix("")  # the source the gallery processed last
        kept = (
            figure_copies.COPIES / f.relative_to(GENERATED).with_suffix(".pickle")
            for f in gallery_format.images(copy)
        )
        if (
            not copy.with_suffix(".md").exists()
            or gallery_format.script_md5(copy) != md5.read_text()
            or not all(k.exists() for k in kept)
        ):
            md5.unlink()


def print_times() -> None:
    """Each example's run time, the total per section (gallery folder), and the grand total."""
    rows = []
    for table in sorted(GENERATED.glob(f"**/{gallery_format.TIMING_TABLE}")):
        section = table.parent.name
        for line in table.read_text().splitlines():
            m = gallery_format.TIMING_ROW.search(line)
            if m:
                mins, _, secs = m.group(2).rpartition(":")
                rows.append((section, m.group(1), float(mins or 0) * 60 + float(secs)))
    print("\nExample execution times (s):")
    for section in dict.fromkeys(sec for sec, _, _ in rows):
        part = [(name, secs) for sec, name, secs in rows if sec == section]
        for name, secs in part:
            print(f"  {secs:7.2f}  {name}")
        print(f"  {sum(s for _, s in part):7.2f}  section {section}, {len(part)} examples")
    print(f"  {sum(s for _, _, s in rows):7.2f}  total, {len(rows)} examples")


def main(argv: list[str]) -> int:
    if len(argv) == 2 and argv[0] == "invalidate":
        invalidate(argv[1])
        return 0
    if argv == ["times"]:
        print_times()
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
