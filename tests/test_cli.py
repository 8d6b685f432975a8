"""python -m attnscale check: on a model directory, a config, and a module:function."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import attnscale
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


FAULTY = """
import torch
from torch import nn


class Crashes(nn.Module):
    def forward(self, x):
        raise RuntimeError("forward broke\\nsecond line")


def make():
    return Crashes(), torch.zeros(2, 3)


def raises():
    raise RuntimeError("the function broke\\nsecond line")
"""


def _main(
    *args: str, capsys: pytest.CaptureFixture[str], cwd: Path | None = None
) -> tuple[int, str, str]:
    """``python -m attnscale check ARGS`` in this process (faster than a new interpreter):
    the exit status, stdout and stderr. torch's random state is restored afterwards."""
    from attnscale.__main__ import main

    capsys.readouterr()
    with torch.random.fork_rng():
        try:
            code = main(["check", *args])
        except SystemExit as exit_:
            code = int(exit_.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


def _one_line_exit_2(code: int, err: str, names: str) -> None:
    """Exit status 2 with a single line on stderr that names the problem; no traceback."""
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert names in lines[0], err


@pytest.fixture
def faulty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "faulty_model.py").write_text(FAULTY)
    (tmp_path / "broken_model_2.py").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (("--seq", "-3"), "--seq"),
        (("--seq", "0"), "--seq"),
        (("--batch", "0"), "--batch"),
        (("--batch", "two"), "--batch"),
        (("--seed", "-1"), "--seed"),
    ],
)
def test_a_bad_option_exits_2_with_one_line(
    args: tuple[str, ...], names: str, faulty: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main("broken_model_2:make", *args, capsys=capsys)
    _one_line_exit_2(code, err, names)


def test_a_target_or_forward_that_raises_exits_2_with_one_line(
    faulty: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _main("faulty_model:raises", capsys=capsys)
    _one_line_exit_2(code, err, "cannot load 'faulty_model:raises': RuntimeError: the function")
    code, _, err = _main("faulty_model:make", capsys=capsys)
    _one_line_exit_2(code, err, "the model's forward raised RuntimeError: forward broke")


def test_an_unwritable_json_path_exits_2_with_one_line(
    faulty: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for path in (faulty / "no" / "such" / "report.json", faulty):
        code, out, err = _main("broken_model_2:make", "--json", str(path), capsys=capsys)
        _one_line_exit_2(code, err, "cannot write --json")
        assert out == ""  # refused before the model ran
    code, out, _ = _main("broken_model_2:make", "--json", "ok.json", capsys=capsys)
    assert code == 1 and (faulty / "ok.json").exists()
    assert out.startswith("weights: made by broken_model_2:make (seed 0)\n")


def test_a_config_directory_repeats_and_says_its_weights_are_random(tmp_path: Path) -> None:
    """Two runs of a config-only directory print the same report: the random initialisation is
    seeded (--seed, default 0), and the first line says it is one."""
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=60)
    config.save_pretrained(tmp_path / "tiny")
    first, second = (_check("tiny", "--seq", "8", cwd=tmp_path) for _ in range(2))
    assert first.returncode == second.returncode == 0, first.stderr
    assert first.stdout == second.stdout
    assert first.stdout.startswith("weights: random initialisation from config.json, seed 0\n")
    other = _check("tiny", "--seq", "8", "--seed", "1", cwd=tmp_path)
    assert other.stdout.startswith("weights: random initialisation from config.json, seed 1\n")
    assert other.stdout != first.stdout  # the seed is what fixed the numbers


def test_a_directory_with_weights_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = transformers.GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=60)
    transformers.GPT2Model(config).save_pretrained(tmp_path / "trained")
    code, out, err = _main(str(tmp_path / "trained"), "--seq", "8", capsys=capsys)
    assert code == 0, err
    assert out.startswith(f"weights: {tmp_path / 'trained'} (safetensors)\n")


def test_version_prints_the_package_version(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "attnscale", "--version"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"attnscale {attnscale.__version__}"
