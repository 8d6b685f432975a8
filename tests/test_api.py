"""The public API is curated, documented and covered by the reference pages."""

import importlib.util
import inspect
import re
from pathlib import Path

import attnscale

REFERENCE = Path(__file__).parents[1] / "docs" / "reference"


def test_all_names_exist_and_are_documented():
    for name in attnscale.__all__:
        obj = getattr(attnscale, name)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), f"{name} has no docstring"


def test_every_public_name_has_a_reference_entry():
    directives = set()
    for page in REFERENCE.glob("*.md"):
        directives |= set(re.findall(r"^::: attnscale\.(\w+)", page.read_text(), re.M))
    missing = set(attnscale.__all__) - directives
    assert not missing, f"public names missing from docs/reference: {sorted(missing)}"
    # modules with optional dependencies (attnscale.hf) are public without a top-level name
    modules = {d for d in directives if importlib.util.find_spec(f"attnscale.{d}") is not None}
    unknown = directives - set(attnscale.__all__) - modules
    assert not unknown, f"reference pages document non-public names: {sorted(unknown)}"
