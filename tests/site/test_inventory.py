"""The API reference documents each public name once, at its one public path, and nothing private.

Read from the built site's ``objects.inv`` (the inventory mkdocstrings writes), as griffe's own
``test_single_locations`` does. Run by ``nox -s browser`` after ``nox -s docs``.
"""

from __future__ import annotations

import zlib
from pathlib import Path

from conftest import public_names

ROOT = Path(__file__).parents[2]
INVENTORY = ROOT / "site" / "objects.inv"


def _inventory() -> dict[str, str]:
    """Documented Python objects: name -> page.

    Only priority-1 entries: mkdocstrings also lists each object's canonical path (e.g.
    ``attnscale._sampling.DISTRIBUTIONS``) at priority 2, pointing at the same anchor; that is
    an alias of the one documented location, not a second one.
    """
    raw = INVENTORY.read_bytes()
    body = raw.split(b"\n", 4)[4]  # four header lines, then zlib
    entries = {}
    for line in zlib.decompress(body).decode().splitlines():
        name, domain_role, prio, uri, *_ = line.split(" ")
        if domain_role.startswith("py:") and prio == "1":
            entries[name] = uri
    return entries


def test_every_public_name_is_documented_at_one_path() -> None:
    documented = _inventory()
    for name in public_names():
        assert f"attnscale.{name}" in documented, f"attnscale.{name} is not in the API reference"
    tops = {n.split(".")[1] for n in documented if n.count(".") == 1}
    for name in public_names():
        others = [
            n
            for n in documented
            if n.endswith(f".{name}")
            and n != f"attnscale.{name}"
            and n.count(".") == 2
            and n.split(".")[1] not in tops
        ]
        assert not others, f"{name} is documented twice: attnscale.{name} and {others}"


def test_no_site_helper_in_the_api_reference() -> None:
    private = [n for n in _inventory() if "._" in n and not n.split(".")[-1].startswith("__")]
    assert not private, f"private names in the API reference: {private[:10]}"
