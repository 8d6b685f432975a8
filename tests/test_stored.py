"""The results tier: full runs stored with provenance, stale code and wrong numbers caught."""

from __future__ import annotations

import dataclasses
import datetime
import importlib
import json
import math
import platform
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from guide import stored

ROOT = Path(__file__).parents[1]

TOY = textwrap.dedent(
    '''
    """A toy experiment: a seeded random walk per seed, cheap enough for a unit test."""
    import numpy as np
    import torch

    from attnscale import _theory as theory
    from guide import stored

    FULL = {"seeds": [0, 1, 2], "steps": 50}
    REDUCED = {"seeds": [1], "steps": 50}
    TOLERANCES = {"walk/walk": stored.Tolerance(1e-6)}


    def parts(budget):
        return ["walk"]


    def run_part(part, budget, device):
        walks = [
            torch.randn(budget["steps"], generator=torch.Generator().manual_seed(s)).cumsum(0)
            for s in budget["seeds"]
        ]
        return {"walk": torch.stack(walks).numpy(), "seeds": np.array(budget["seeds"])}


    def agree(full, live):
        kept, now = full.parts["walk"], live["walk"]
        checks = []
        for c, s in enumerate(now["seeds"]):
            i = list(kept["seeds"]).index(s)
            checks.append(
                stored.close(f"seed {s}: end of the walk", float(kept["walk"][i, -1]),
                             float(now["walk"][c, -1]), rtol=1e-6)
            )
        return checks


    EXPERIMENT = stored.Experiment(
        name="toy", parts=parts, run_part=run_part, full=FULL, reduced=REDUCED, agree=agree,
        uses=(theory,),
    )
    '''
)


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """A package ``toy_studies`` holding the toy experiment, and a results root."""
    package = tmp_path / "toy_studies"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "toy.py").write_text(TOY)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(stored, "STUDIES", "toy_studies")
    yield package / "toy.py", tmp_path / "results"
    for name in [m for m in sys.modules if m.startswith("toy_studies")]:
        del sys.modules[name]


def test_run_then_load_and_verify(toy):
    _, root = toy
    folder = stored.run("toy", root=root, log=lambda _: None)
    assert sorted(p.name for p in folder.iterdir()) == [
        stored.FINGERPRINT_VALUES,
        "provenance.json",
        "walk.npz",
    ]
    fp = json.loads((folder / "provenance.json").read_text())["fingerprint"]
    assert [list(r["arrays"]) for r in fp["records"]] == [["walk/walk", "walk/seeds"]]
    assert fp["records"][0]["arithmetic"] == stored.arithmetic()
    assert (folder / stored.FINGERPRINT_VALUES).exists()
    full = stored.load("toy", root=root)
    assert full.parts["walk"]["walk"].shape == (3, 50)
    checks = stored.verify(full, stored.rerun("toy"))
    assert [c.ok for c in checks] == [True]
    assert "seeds [0, 1, 2]" in full.summary()


def test_missing_run_names_the_command(toy):
    _, root = toy
    with pytest.raises(stored.StaleResults, match=r"'toy'.*nox -s experiments -- toy"):
        stored.load("toy", root=root)


def test_a_code_change_makes_the_stored_run_stale(toy):
    source, root = toy
    stored.run("toy", root=root, log=lambda _: None)
    # A docstring or a comment is not code: the stored run stays current.
    source.write_text(source.read_text().replace('"""A toy', '"""Still a toy') + "# a comment\n")
    importlib.reload(importlib.import_module("toy_studies.toy"))
    stored.load("toy", root=root)
    # A change of code is.
    source.write_text(source.read_text().replace(".cumsum(0)", ".cumsum(0) * 2"))
    importlib.reload(importlib.import_module("toy_studies.toy"))
    with pytest.raises(
        stored.StaleResults,
        match=r"'toy'.*code changed.*behaviour changed.*'walk/walk'.*nox -s experiments -- toy",
    ):
        stored.load("toy", root=root)


def test_a_refactor_that_reproduces_the_fingerprint_keeps_the_run(toy):
    source, root = toy
    stored.run("toy", root=root, log=lambda _: None)
    records = json.loads((root / "toy" / "provenance.json").read_text())["fingerprint"]["records"]
    assert [r["threads"] for r in records] == [1]
    # The same numbers from other code: a new code hash, the same fingerprint.
    source.write_text(
        source.read_text()
        .replace("def run_part(part, budget, device):", "def _walk(budget):")
        .replace(
            '    return {"walk"',
            "    return walks\n\n\ndef run_part(part, budget, device):\n"
            '    walks = _walk(budget)\n    return {"walk"',
        )
    )
    importlib.reload(importlib.import_module("toy_studies.toy"))
    kept = json.loads((root / "toy" / "provenance.json").read_text())["code_hash"]
    assert stored.code_hash(stored.experiment("toy")) != kept
    full = stored.load("toy", root=root)
    assert "(fingerprint reproduced bit for bit)" in full.summary()
    assert [c.ok for c in stored.verify(full, stored.rerun("toy"))] == [True]
    # Without a fingerprint, a new code hash is a stale run.
    prov = json.loads((root / "toy" / "provenance.json").read_text())
    del prov["fingerprint"]
    (root / "toy" / "provenance.json").write_text(json.dumps(prov))
    with pytest.raises(stored.StaleResults, match="no fingerprint"):
        stored.load("toy", root=root)


def test_a_confirmed_code_hash_needs_no_rerun(toy, monkeypatch):
    """``confirm`` records a code hash that reproduced the fingerprint; where it is recorded,
    load trusts it (another Python's fingerprint may differ in the last bits)."""
    source, root = toy
    stored.run("toy", root=root, log=lambda _: None)
    source.write_text(source.read_text() + "\nUNUSED = 1\n")
    importlib.reload(importlib.import_module("toy_studies.toy"))
    now = stored.confirm("toy", root=root)
    fp = json.loads((root / "toy" / "provenance.json").read_text())["fingerprint"]
    assert [r["code_hash"] for r in fp["reproduced"]] == [now]
    assert stored.confirm("toy", root=root) == now  # recorded once
    assert (
        len(json.loads((root / "toy" / "provenance.json").read_text())["fingerprint"]["reproduced"])
        == 1
    )

    def no_rerun(*_):
        raise AssertionError("the fingerprint was rerun")

    real = stored.fingerprint
    monkeypatch.setattr(stored, "fingerprint", no_rerun)
    stored._REPRODUCED.clear()
    assert stored.load("toy", root=root).code_hash_now == now
    # a code hash that changed the numbers is refused
    monkeypatch.setattr(stored, "fingerprint", real)
    source.write_text(source.read_text().replace(".cumsum(0)", ".cumsum(0) * 2"))
    importlib.reload(importlib.import_module("toy_studies.toy"))
    with pytest.raises(stored.StaleResults, match="behaviour changed"):
        stored.confirm("toy", root=root)


def test_the_fingerprint_is_one_thread_and_bitwise(toy, monkeypatch):
    """A change in the last bit of one array is a change of behaviour; the thread count the
    caller set is restored."""
    _, root = toy
    stored.run("toy", root=root, log=lambda _: None)
    threads = torch.get_num_threads()
    seen = []
    module = importlib.import_module("toy_studies.toy")
    real = module.EXPERIMENT.run_part

    def nudged(part, budget, device):
        seen.append(torch.get_num_threads())
        out = real(part, budget, device)
        out["walk"].view(np.uint32)[0, -1] ^= 1  # the last bit of one float32
        return out

    monkeypatch.setattr(
        module, "EXPERIMENT", dataclasses.replace(module.EXPERIMENT, run_part=nudged)
    )
    monkeypatch.setattr(stored, "code_hash", lambda exp: "0" * 64)
    with pytest.raises(stored.StaleResults, match=r"1 array\(s\), first 'walk/walk'"):
        stored.load("toy", root=root)
    assert seen == [1] and torch.get_num_threads() == threads


def test_a_change_to_the_checks_keeps_the_stored_run_current(toy):
    source, root = toy
    stored.run("toy", root=root, log=lambda _: None)
    # The agreement checks and the reduced budget check a run; they did not produce it.
    source.write_text(
        source.read_text()
        .replace("rtol=1e-6", "rtol=1e-3")
        .replace('REDUCED = {"seeds": [1]', 'REDUCED = {"seeds": [2]')
    )
    module = importlib.reload(importlib.import_module("toy_studies.toy"))
    assert module.REDUCED["seeds"] == [2]
    stored.verify(stored.load("toy", root=root), stored.rerun("toy"))
    # A helper of the producing code keeps its place in the hash, whatever calls it.
    source.write_text(source.read_text().replace("def parts(budget):", "def parts(budget, *_):"))
    importlib.reload(importlib.import_module("toy_studies.toy"))
    assert (
        stored.code_hash(stored.experiment("toy"))
        != stored.load("toy", root=root).provenance["code_hash"]
    )


def test_a_change_in_a_used_library_module_changes_the_hash(toy, monkeypatch):
    _, root = toy
    stored.run("toy", root=root, log=lambda _: None)
    before = stored.code_hash(stored.experiment("toy"))
    real = stored.producing_code
    monkeypatch.setattr(
        stored,
        "producing_code",
        lambda m: real(m) + ("changed" if m.__name__ == "attnscale._theory" else ""),
    )
    assert stored.code_hash(stored.experiment("toy")) != before
    # the toy's numbers do not depend on theory: its fingerprint keeps the run current
    assert stored.load("toy", root=root).code_hash_now


def test_a_wrong_stored_number_fails_the_agreement(toy):
    _, root = toy
    folder = stored.run("toy", root=root, log=lambda _: None)
    with np.load(folder / "walk.npz") as data:
        arrays = {k: data[k] for k in data.files}
    arrays["walk"][1, -1] += 0.01  # seed 1 is the one the reduced run repeats
    np.savez_compressed(folder / "walk.npz", **arrays)
    full = stored.load("toy", root=root)
    with pytest.raises(
        stored.Disagreement, match=r"(?s)seed 1: end of the walk.*nox -s experiments"
    ):
        stored.verify(full, stored.rerun("toy"))


def test_an_interrupted_run_resumes(toy, monkeypatch):
    _, root = toy
    stored.run("toy", root=root, log=lambda _: None)
    first = json.loads((root / "toy" / "provenance.json").read_text())
    calls = []
    module = importlib.import_module("toy_studies.toy")
    counting = dataclasses.replace(module.EXPERIMENT, run_part=lambda *a: calls.append(a))
    monkeypatch.setattr(module, "EXPERIMENT", counting)
    stored.run("toy", root=root, log=lambda _: None)  # nothing left to run
    assert calls == []
    assert json.loads((root / "toy" / "provenance.json").read_text()) == first


def test_close_and_same_direction():
    assert stored.close("x", 1.0, 1.004, rtol=0.005).ok
    assert not stored.close("x", 1.0, 1.006, rtol=0.005).ok
    assert stored.close("x", float("inf"), float("inf"), rtol=0.1).ok
    assert not stored.close("x", 1.0, float("nan"), rtol=0.1).ok
    assert stored.same_direction("x", -0.2, -1e-3).ok
    assert not stored.same_direction("x", -0.2, 0.1).ok


def test_unknown_experiment():
    with pytest.raises(ValueError, match="unknown experiment 'nope'"):
        stored.experiment("nope")


# --- the stored runs of the guide -------------------------------------------------------------


@pytest.mark.parametrize("name", stored.names())
def test_reduced_budget_is_part_of_the_full_one(name):
    exp = stored.experiment(name)
    assert set(exp.parts(exp.reduced)) <= set(exp.parts(exp.full))
    for key, value in exp.reduced.items():
        if isinstance(value, list) and key in exp.full:
            assert set(value) <= set(exp.full[key]), key


def _used_by_the_site(name: str) -> bool:
    """Whether a gallery script loads experiment ``name`` (the build then requires its run)."""
    pages = [*ROOT.glob("examples/*/plot_*.py"), *ROOT.glob("factcheck/plot_*.py")]
    loads = (f'stored.load("{name}")', f"experiments.{name}()", f'rerun("{name}")')
    return any(key in p.read_text() for p in pages for key in loads)


def _skip_while_in_progress(name: str) -> None:
    """An experiment that no page uses yet is one whose full run is being made (hours, over
    sessions): the parts stored so far are today's code's, and the run is not complete."""
    if _used_by_the_site(name):
        return
    done, total = stored.progress(name)
    assert 0 < done < total, f"no gallery page uses experiment {name}, yet {done} of {total} parts"
    folder = stored.RESULTS / name
    listed = json.loads((folder / "provenance.json").read_text())["parts"]
    missing = [part for part in listed if not (folder / f"{part}.npz").exists()]
    assert not missing, f"{name}: parts in its provenance without their arrays: {missing}"
    pytest.skip(f"{name}: its full run is being made ({done} of {total} parts stored)")


@pytest.mark.parametrize("name", stored.names())
def test_stored_provenance_is_present_and_true(name):
    _skip_while_in_progress(name)
    full = stored.load(name)  # current: the same code hash and budget as today's code
    exp = stored.experiment(name)
    assert full.provenance["budget"] == json.loads(json.dumps(exp.full))
    commits = subprocess.run(
        ["git", "rev-list", "--all"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    made_by, now = full.provenance["code_hash"], stored.code_hash(exp)
    fp = full.provenance["fingerprint"]
    confirmed = [r["code_hash"] for r in fp.get("reproduced", [])]
    if now != made_by:  # a refactor since the run: the hash is recorded, and the record true
        assert now in confirmed, f"run `python -m guide.stored confirm {name}`"
    # each record of the fingerprint was made by the code that made the run, or by code that
    # reproduced it; one of them kept the values that other arithmetics compare with
    assert fp["records"] and (stored.RESULTS / name / stored.FINGERPRINT_VALUES).exists()
    for record in fp["records"]:
        assert record["code_hash"] in (made_by, *confirmed) and record["threads"] == 1
        assert set(record["arithmetic"]) >= {"cpu", "capability", "blas", "torch", "python"}
    # today's code reproduces it: bit for bit where this arithmetic made a record, else within
    # the experiment's tolerances
    _skip_where_not_comparable(exp, fp)
    live = stored.fingerprint(exp, fp["budget"])
    _, why = stored.compare(exp, stored.RESULTS / name, fp, live)
    assert not why, why
    for part, record in full.provenance["parts"].items():
        assert record["code_hash"] == made_by, part
        if commits:  # a git checkout, not an installed wheel
            assert record["commit"] in commits, part
        assert record["torch"].split("+")[0].count(".") == 2
        assert record["device"].startswith(("cpu: ", "cuda: "))
        assert record["threads"] >= 1 and record["seconds"] > 0
        finished = datetime.datetime.fromisoformat(record["finished"])
        assert finished <= datetime.datetime.now(datetime.UTC)
        assert full.parts[part], part


def _skip_where_not_comparable(exp: stored.Experiment, fp: dict) -> None:
    """A fingerprint compares arithmetics, not software: another torch release may change
    kernels, and the studies that train on CPython's help text train on other data on another
    Python. There the code-hash record stands alone."""
    torches = {r["arithmetic"]["torch"] for r in fp["records"]}
    if torch.__version__ not in torches:
        pytest.skip(f"the fingerprint was recorded with torch {sorted(torches)}")
    from guide.studies import logit_growth

    pythons = {r["arithmetic"]["python"] for r in fp["records"]}
    uses_corpus = exp.name == "logit_growth" or logit_growth in exp.uses
    if uses_corpus and platform.python_version() not in pythons:
        pytest.skip(f"{exp.name} trains on the help text of Python {sorted(pythons)}")


@pytest.mark.parametrize("name", stored.names())
def test_a_planted_change_of_behaviour_makes_the_stored_run_stale(name):
    """Every Adam step 1% larger (``stored.planted_change``): outside the tolerances, under
    whatever arithmetic this test runs (CI runs it under two)."""
    _skip_while_in_progress(name)
    exp = stored.experiment(name)
    fp = stored.load(name).provenance["fingerprint"]
    _skip_where_not_comparable(exp, fp)
    with stored.planted_change():
        live = stored.fingerprint(exp, fp["budget"])
    how, why = stored.compare(exp, stored.RESULTS / name, fp, live)
    assert why.startswith("its behaviour changed"), (how, why)
    # and on an arithmetic no record was made on, where only the tolerances decide
    other = {"records": [{**r, "arithmetic": {"cpu": "elsewhere"}} for r in fp["records"]]}
    how, why = stored.compare(exp, stored.RESULTS / name, other, live)
    assert how == "within its tolerances" and why.startswith("its behaviour changed"), why


def test_bits_count_only_on_the_arithmetic_that_made_them(toy, monkeypatch):
    """A difference in the last bit is a change of behaviour where the stored bits were made;
    elsewhere the values decide, within the experiment's tolerances."""
    _, root = toy
    stored.run("toy", root=root, log=lambda _: None)
    module = importlib.import_module("toy_studies.toy")
    real = module.EXPERIMENT.run_part
    factor = {"value": None}

    def changed(part, budget, device):
        out = real(part, budget, device)
        if factor["value"] is None:
            out["walk"].view(np.uint32)[0, -1] ^= 1  # the last bit of one float32
        else:
            out["walk"] *= factor["value"]
        return out

    monkeypatch.setattr(
        module, "EXPERIMENT", dataclasses.replace(module.EXPERIMENT, run_part=changed)
    )
    monkeypatch.setattr(stored, "code_hash", lambda exp: "0" * 64)
    with pytest.raises(stored.StaleResults, match="bit for bit on this arithmetic"):
        stored.load("toy", root=root)
    here = stored.arithmetic()
    monkeypatch.setattr(stored, "arithmetic", lambda: {**here, "cpu": "another CPU"})
    stored._REPRODUCED.clear()
    full = stored.load("toy", root=root)
    assert full.reproduced == "within its tolerances"
    assert "(fingerprint reproduced within its tolerances)" in full.summary()
    factor["value"] = 1.001  # beyond the toy's rtol of 1e-6
    stored._REPRODUCED.clear()
    with pytest.raises(stored.StaleResults, match=r"tolerances\) in 1 array\(s\).*'walk/walk'"):
        stored.load("toy", root=root)


def test_deviation():
    a = np.array([1.0, -2.0, np.nan, np.inf], dtype=np.float32)
    assert stored.deviation(a, a.copy(), 0.0, 0.0) == 0.0
    b = a.copy()
    b[0] = 1.001
    assert stored.deviation(a, b, 0.0, 0.0) == math.inf  # exact where no tolerance is given
    # the norm of the difference against rtol times the norm of the stored finite values
    assert math.isclose(stored.deviation(a, b, 1e-3 / math.sqrt(5), 0.0), 1.0, rel_tol=1e-3)
    assert math.isclose(stored.deviation(a, b, 0.0, 1e-3 / math.sqrt(2)), 1.0, rel_tol=1e-3)
    b[2] = 0.0  # a NaN elsewhere
    assert stored.deviation(a, b, 1.0, 1.0) == math.inf
    ints = np.arange(3)
    assert stored.deviation(ints, ints + 1, 1.0, 1.0) == math.inf  # integers are exact
    assert stored.deviation(a, a[:2], 1.0, 1.0) == math.inf


def test_a_tolerance_can_compare_the_early_steps_only():
    """A chaotic curve: the last bits grow over the steps, so only its first steps are compared;
    ``first=0`` leaves an array to the others."""
    kept = {"p/curve": np.array([[1.0, 2.0, 3.0, 4.0]]), "p/final": np.array([5.0])}
    live = {"p/curve": np.array([[1.0, 2.0, 3.5, 9.0]]), "p/final": np.array([7.0])}
    tol = {"*/curve": stored.Tolerance(1e-6, first=2), "*/final": stored.Tolerance(0.0, first=0)}
    assert stored.deviations(kept, live, tol) == {"p/curve": 0.0, "p/final": 0.0}
    tol = {"*/curve": stored.Tolerance(1e-6, first=3)}
    found = stored.deviations(kept, live, tol)
    assert found["p/curve"] > 1 and found["p/final"] == math.inf  # no pattern: must be equal


def test_this_python_has_the_logit_growth_text():
    """The logit-growth page skips its rerun where Python ships other help topics; not on the
    Python the stored run was made with (the docs build's)."""
    from guide.studies import logit_growth

    full = stored.load("logit_growth")
    made_on = {r["python"] for r in full.provenance["parts"].values()}
    if platform.python_version() not in made_on:
        pytest.skip(f"the stored run was made on Python {sorted(made_on)}")
    kept = full.parts["inverse_sqrt_lr-4"]["corpus_sha256"]
    assert logit_growth.corpus()[1] == str(kept)


def test_parts_run_separately_fill_one_run(toy):
    """``--parts``: processes that each run some parts leave one complete stored run."""
    source, root = toy
    text = source.read_text().replace('return ["walk"]', 'return ["walk", "walk2"]')
    text = text.replace("run_part=run_part,", "run_part=lambda p, b, d: run_part('walk', b, d),")
    source.write_text(text)
    assert stored.progress("toy", root=root) == (0, 2)
    stored.run("toy", parts=["walk2"], root=root, log=lambda _: None)
    assert stored.progress("toy", root=root) == (1, 2)
    # how long the stored part took, and where, from its provenance (no stated estimate)
    took = stored._read_provenance(root / "toy")["parts"]["walk2"]
    where = f"its stored parts took {took['seconds'] / 3600:.1f} h on {took['device']}"
    with pytest.raises(stored.StaleResults, match=rf"1 of 2 parts.*{re.escape(where)}"):
        stored.load("toy", root=root)
    stored.run("toy", parts=["walk"], root=root, log=lambda _: None)
    assert stored.progress("toy", root=root) == (2, 2)
    assert sorted(stored.load("toy", root=root).parts) == ["walk", "walk2"]
    source.write_text(source.read_text().replace(".cumsum(0)", ".cumsum(0) * 2"))
    importlib.reload(importlib.import_module("toy_studies.toy"))
    assert stored.progress("toy", root=root) == (0, 2)  # other code: its parts are not stored
    with pytest.raises(ValueError, match="parts: toy has no part"):
        stored.run("toy", parts=["nope"], root=root, log=lambda _: None)


def test_checks_table_shows_every_check():
    checks = [stored.close("a", 1.0, 1.001, rtol=0.01), stored.same_direction("b", -1.0, -2.0)]
    text = str(stored.checks_table(checks))
    header = [cell.strip() for cell in text.splitlines()[0].split("|")[1:-1]]
    assert header == ["check", "stored", "rerun now", "required"]
    assert all(c.what in text and c.bound in text for c in checks)


def test_the_code_hash_reads_the_same_on_every_python():
    """No empty field (``type_params=[]`` exists from Python 3.12) and no quoting style (an
    f-string's quotes as ``ast.unparse`` writes them changed in 3.12) reaches the hash."""
    import ast

    text = stored._canonical(ast.parse("def f(x):\n    return f'{x!r}'\n"))
    assert "type_params" not in text and "decorator_list" not in text and "'" not in text[:20]
    assert text.startswith("Module(body=[FunctionDef(name='f', args=arguments(args=[arg(arg='x')])")
