"""The command line: ``python -m attnscale_tools.i18n check | skeleton [SOURCE...] | build``."""

from __future__ import annotations

import argparse
import os
import sys

from attnscale_tools import ROOT

from .sources import PAGES, SCRIPTS, TranslationError, page_strings, problems, skeleton
from .tree import BUILD, assemble

#: Set (to 1) where a generated text with no catalogue entry must fail the build: CI.
STRICT = "ATTNSCALE_STRICT_CATALOGUE"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m attnscale_tools.i18n",
        description="The Chinese edition's translations and docs tree.",
    )
    command = parser.add_subparsers(dest="command", required=True)
    command.add_parser("check", help="list every missing, untranslated or stale translation")
    skeletons = command.add_parser(
        "skeleton", help="write or refresh translation files, keeping their current entries"
    )
    skeletons.add_argument(
        "sources", nargs="*", metavar="SOURCE", help="gallery scripts or pages (default: all)"
    )
    command.add_parser("build", help="assemble the Chinese docs tree from the English build")
    args = parser.parse_args(argv)
    if args.command == "check":
        found = problems()
        print("\n".join(map(str, found)) or "every translation is current")
        return 1 if found else 0
    if args.command == "skeleton":
        unknown = sorted(set(args.sources) - {*SCRIPTS, *PAGES})
        if unknown:
            parser.error(f"not a gallery script or translated page: {', '.join(unknown)}")
        for source in args.sources or [*SCRIPTS, *PAGES]:
            strings = page_strings(source) if source in SCRIPTS else []
            print(skeleton(source, strings).relative_to(ROOT))
        return 0
    try:
        stale, missing = assemble()
    except TranslationError as err:
        print(f"Chinese edition: {err}")
        return 1
    if stale:
        print("Stale Chinese strings (their English is gone):\n  " + "\n  ".join(stale))
        return 1
    if missing:
        # A number this build printed can take a branch no earlier build took: the reader's
        # build shows that line in English; CI, where STRICT is set, fails on it.
        strict = os.environ.get(STRICT, "") not in ("", "0")
        print(
            f"{'Error' if strict else 'Warning'}: generated texts with no Chinese entry, shown "
            f"in English (add them with python -m attnscale_tools.catalogue skeleton):\n  "
            + "\n  ".join(missing)
        )
        if strict:
            return 1
    print(f"Chinese docs tree written to {BUILD.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
