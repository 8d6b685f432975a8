"""The public API is curated, documented and covered by the reference pages."""

import ast
import importlib
import importlib.util
import inspect
import pkgutil
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


# The public modules: the package itself, and two namespaces a user imports on purpose.
# ``attnscale.testing`` is for users' own test suites (like ``numpy.testing``);
# ``attnscale.hf`` needs the optional ``transformers``, so it stays out of the top level.
# Everything else is implementation, in private modules (``attnscale._strategies``, ...).
PUBLIC_MODULES = {"attnscale", "attnscale.hf", "attnscale.testing"}
SRC = Path(attnscale.__file__).parent


def _public_module_names() -> set[str]:
    """attnscale and every submodule with no private part in its dotted path."""
    found = {m.name for m in pkgutil.walk_packages(attnscale.__path__, "attnscale.")}
    return {"attnscale"} | {n for n in found if not any(p.startswith("_") for p in n.split("."))}


def _public_modules() -> dict[str, object]:
    modules = {}
    for name in sorted(_public_module_names()):
        try:
            modules[name] = importlib.import_module(name)
        except ModuleNotFoundError as err:  # an optional dependency (transformers for hf)
            assert err.name and not err.name.startswith("attnscale"), err
    return modules


def test_the_public_modules_are_the_ones_meant():
    assert _public_module_names() == PUBLIC_MODULES


def test_every_public_object_has_exactly_one_public_path():
    """griffe's rule: a module's public names are its ``__all__``. Each object of the API is
    reachable by one public path, so docs, errors and users all name it the same way."""
    paths: dict[int, list[str]] = {}
    for name, module in _public_modules().items():
        assert hasattr(module, "__all__"), f"{name} does not declare its public names"
        for attr in module.__all__:
            obj = getattr(module, attr)
            if isinstance(obj, (bool, int, float, str)):  # interned values have no identity
                continue
            paths.setdefault(id(obj), []).append(f"{name}.{attr}")
    repeated = sorted(p for p in paths.values() if len(p) > 1)
    assert not repeated, f"objects with more than one public path: {repeated}"
    assert len(paths) >= len(attnscale.__all__) - 1  # GUIDE_URL is the one string


def test_the_implementation_lives_in_private_modules():
    for name in attnscale.__all__:
        obj = getattr(attnscale, name)
        module = getattr(obj, "__module__", None)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert module and module.split(".")[1].startswith("_"), (name, module)


def test_the_lazy_plot_helpers_are_the_plotting_module():
    from attnscale import _plotting

    assert set(attnscale._PLOTTING) == set(_plotting.__all__)
    assert set(attnscale._PLOTTING) <= set(attnscale.__all__)


def _from_attnscale(node: ast.AST, package: str) -> str | None:
    """The absolute module of ``from X import ...`` when X is in attnscale, else None."""
    if not isinstance(node, ast.ImportFrom):
        return None
    if node.level:
        return importlib.util.resolve_name("." * node.level + (node.module or ""), package)
    return node.module if (node.module or "").startswith("attnscale") else None


def _is_module(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except ModuleNotFoundError:  # a name in a module, not a package's submodule
        return False


def test_no_private_name_is_imported_across_modules():
    """Private modules hold public names (``from ._strategies import make_strategy``); a
    name with a leading underscore is used only in the module that defines it."""
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        package = ".".join(rel.parts[:-1])
        tree = ast.parse(path.read_text())
        modules = set()  # names bound to attnscale modules here
        for node in ast.walk(tree):
            source = _from_attnscale(node, package)
            if source is None:
                continue
            for alias in node.names:  # type: ignore[attr-defined]
                if _is_module(f"{source}.{alias.name}"):
                    modules.add(alias.asname or alias.name)
                elif alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append(f"{rel}: from {source} import {alias.name}")
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in modules
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{rel}: {node.value.id}.{node.attr}")
    assert not found, found
