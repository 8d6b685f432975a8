"""python -m attnscale check: on a model directory, a config, and a module:function."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from attnscale import MonitorReport

transformers = pytest.importorskip("transformers")

BROKEN = """
import torch
from torch import nn


class Unscaled(nn.Module):
    def forward(self, x):
        return torch.softmax(x @ x.transpose(-2, -1), dim=-1) @ x  # no 1/sqrt(d)


def make():
    return Unscaled(), 0.1 * torch.randn(2, 4, 16, 64)
"""


def _check(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "attnscale", "check", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=300,
        check=False,
    )


def test_a_model_directory_passes_and_writes_json(tmp_path: Path) -> None:
    config = transformers.GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=60)
    config.save_pretrained(tmp_path / "gpt2-tiny")  # a config alone: random weights
    done = _check(str(tmp_path / "gpt2-tiny"), "--json", "report.json", "--seq", "16", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "h.1.attn" in done.stdout
    report = MonitorReport.from_dict(json.loads((tmp_path / "report.json").read_text()))
    assert len(report.records) == 2


def test_a_missing_scale_exits_1_and_a_bad_target_2(tmp_path: Path) -> None:
    (tmp_path / "broken_model.py").write_text(BROKEN)
    done = _check("broken_model:make", cwd=tmp_path)
    assert done.returncode == 1
    assert "scale-mismatch" in done.stdout
    assert _check("broken_model:make", "--fail-on", "error", cwd=tmp_path).returncode == 0
    bad = _check("no_such_module:make", cwd=tmp_path)
    assert bad.returncode == 2
    assert "cannot load 'no_such_module:make'" in bad.stderr
