"""The text of a MonitorReport: at most 88 columns wide, whatever the report holds, with each
finding's message wrapped and its likely cause and fix on lines of their own; the columns the
text leaves out are in to_dataframe; the Chinese edition's tools read each part as a unit."""

from __future__ import annotations

import dataclasses
import math
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from healthy_stats import HEAD_DIM as D
from healthy_stats import healthy_stats
from torch import nn

from attnscale import THRESHOLDS, AttentionMonitor, AttentionStats, MonitorReport
from attnscale._monitor.diagnosis import compiled, diagnose, grouped, no_attention
from attnscale._monitor.report import GUIDE_URL, TEXT_WIDTH, AttentionRecord, Finding
from attnscale_tools import catalogue

LONG = "model.encoder.transformer_blocks.{}.multi_head_self_attention.inner_attention_module"


_stats = healthy_stats


def _scaled(ratio: float, **changes: Any) -> AttentionStats:
    return _stats(scale=ratio / math.sqrt(D), scale_ratio=ratio, **changes)


# statistics that give every finding code diagnose() knows, at each severity it has
BUGGY = {
    "no scale": _scaled(8.0, logit_std=2.8, max_abs_logit=12.1),
    "no scale, wide": _scaled(8.0, logit_std=9.0, max_abs_logit=60.0, saturated_fraction=0.5),
    "d_model": _scaled(0.5),
    "double": _scaled(0.125),
    "gemma": _scaled(math.sqrt(256 / 224)),
    "inverted": _scaled(64.0, logit_std=40.0, max_abs_logit=1e4, saturated_fraction=0.99),
    "learned": _scaled(3.0, scale_learned=True),
    "folded": _scaled(8.0, q_std=0.5 / 8, k_std=0.5),
    "per head": _stats(scale_per_head=(0.125, 0.125, 1.0, 0.125), scale=0.125 * 0.5**0.25),
    "length temperature": _stats(scale_range=(D**-0.5, 3 * D**-0.5)),
    "normalised, tight": _scaled(0.1, qk_norm_cv=0.0, logit_bound=0.4, keys=32),
    "normalised": _scaled(10.0, qk_norm_cv=0.0, logit_bound=12.0, keys=32),
    "large logits": _stats(logit_std=6.0, max_abs_logit=40.0, saturated_fraction=0.3),
    "head max logit": _stats(heads={"max_logit": [3.0, None, 250.0, 2.0]}),
    "collapse": _stats(min_head_normalized_entropy=0.01, max_probability=0.99),
    "sinks": _stats(
        head_normalized_entropy=(0.2, 0.9, 0.3, 0.8),
        head_first_key_weight=(0.95, 0.1, 0.9, 0.1),
        head_sink_key=(0.0, 3.0, 0.0, 5.0),
        head_sink_weight=(0.95, 0.1, 0.9, 0.1),
        head_rest_entropy=(0.05, math.nan, 0.7, math.nan),
        head_positional_share=(0.1, 0.1, 0.1, 0.1),
        head_saturated_fraction=(0.0, 0.0, 0.0, 0.0),
    ),
    "masked rows": _stats(masked_rows=3, first_masked_row=(0, 1, 0)),
    "masked rows, NaN": _stats(masked_rows=3, masked_rows_nonfinite=3, first_masked_row=(1, 3, 7)),
    "leaky mask": _stats(mask_leak=0.2, max_abs_logit=30.0),
    "non-finite": _stats(nonfinite_logits=4, nonfinite_outputs=2, dtype="float16"),
    "non-finite input": _stats(nonfinite_inputs=12),
    "fp16 near": _stats(dtype="float16", max_abs_qk=20000.0),
    "fp16 over": _stats(dtype="float16", max_abs_qk=math.inf),
}


def _report(sites: dict[str, AttentionStats], declared: float | None = None) -> MonitorReport:
    """The report a monitor gives for these sites' statistics (one call each)."""
    found = [
        (f, s)
        for where, s in sites.items()
        for f in diagnose(where, s, THRESHOLDS, expected_scale=declared)
    ]
    records = [AttentionRecord(where, "softmax(QK^T)", [s]) for where, s in sites.items()]
    findings = grouped(found)
    findings.sort(key=lambda f: -{"info": 0, "warning": 1, "error": 2}[f.severity])
    return MonitorReport(records, findings)


def _reports() -> dict[str, MonitorReport]:
    every_layer = {LONG.format(i): BUGGY["no scale"] for i in range(24)}
    every_bug = {LONG.format(i): s for i, s in enumerate(BUGGY.values())}
    extra = [
        no_attention(0),
        no_attention(5),
        compiled("model.encoder", 3),
        Finding("monitor-error", "warning", LONG.format(0), "The monitor failed: " + "x" * 200),
    ]
    return {
        **{name: _report({name.replace(" ", "_"): s}) for name, s in BUGGY.items()},
        "declared, off": _report({"attn": BUGGY["d_model"]}, declared=D**-0.5 / 4),
        "declared, on": _report({"attn": BUGGY["d_model"]}, declared=0.5 / math.sqrt(D)),
        "every layer": _report(every_layer),
        "every bug": _report(every_bug),
        "model-wide": MonitorReport([], extra),
        "run": MonitorReport(
            [AttentionRecord("blocks.0.attn", "sdpa", [_stats(step=i) for i in range(60)])],
            [
                dataclasses.replace(f, first_step=12)
                for f in diagnose("blocks.0.attn", BUGGY["collapse"], THRESHOLDS)
            ],
        ),
        "empty": MonitorReport([], []),
    }


REPORTS = _reports()


def test_the_statistics_give_every_finding_code() -> None:
    """The reports below cover every code the monitor has, at every severity it gives."""
    from attnscale._monitor.facts import FINDINGS

    seen = {(f.code, f.severity) for r in REPORTS.values() for f in r.findings}
    assert {code for code, _ in seen} == set(FINDINGS)
    assert {"error", "warning", "info"} <= {sev for _, sev in seen if sev}


@pytest.mark.parametrize("name", list(REPORTS))
def test_no_line_is_wider_than_88_columns(name: str) -> None:
    text = str(REPORTS[name])
    wide = [line for line in text.split("\n") if len(line) > TEXT_WIDTH]
    assert not wide, f"{name}:\n" + "\n".join(wide)
    assert TEXT_WIDTH == 88


def _paragraphs(text: str) -> list[str]:
    """The report's findings as the reader reads them: each first line with the lines
    indented under it joined."""
    out: list[str] = []
    for line in text.split("\n"):
        if out and line.startswith("      "):  # under a header (11) or a part (6)
            out[-1] += " " + line.strip()
        else:
            out.append(line.strip())
    return out


@pytest.mark.parametrize("name", list(REPORTS))
def test_every_finding_is_all_there_cause_and_fix_on_lines_of_their_own(name: str) -> None:
    report = REPORTS[name]
    paragraphs = _paragraphs(str(report))
    for f in report.findings:
        tag = f"[{f.severity.upper()}]"
        assert any(p.startswith(tag) and f" {f.code} at " in p for p in paragraphs)
        message, page = f.message, ""
        see = re.search(r" See (\S+)$", message)
        if see and see[1].startswith(GUIDE_URL.rsplit("/", 2)[0]):
            message, page = message[: see.start()], see[1]
        parts = re.split(r" (?=Likely cause: |Fix: )", message)
        # each part starts a line, and nothing is lost or changed (a path longer than a line
        # is broken in two)
        dense = ["".join(p.split()) for p in paragraphs]
        for part in parts:
            assert "".join(part.split()) in dense, f"{part!r} not a paragraph of\n{report}"
        if page:
            gallery = GUIDE_URL.removesuffix("05_debugging/")
            relative = page.removeprefix(GUIDE_URL).removeprefix(gallery).rstrip("/")
            if not page.startswith(GUIDE_URL):  # another section of the guide
                relative = "../" + relative
            assert f"guide: {relative}" in paragraphs
            assert f"guide: {GUIDE_URL}<page>/" in paragraphs
    if any("Likely cause: " in f.message for f in report.findings):
        lines = str(report).split("\n")
        assert any(line.startswith("    Likely cause: ") for line in lines)
        assert any(line.startswith("    Fix: ") for line in lines)


def test_the_scale_findings_reads_in_parts() -> None:
    """The example issue 43 quoted: the measurement, the cause and the fix each start a line,
    at most 88 columns wide."""
    lines = str(REPORTS["no scale"]).split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("[ERROR]"))
    assert lines[start].split() == ["[ERROR]", "scale-mismatch", "at", "no_scale", "(step", "0)"]
    assert lines[start + 1] == (
        "    The scores are multiplied by 1 (traced), 8 × 1/√head_dim for head_dim 64."
    )
    assert lines[start + 2].startswith("    Likely cause: no scale at all")
    fix = next(line for line in lines if line.startswith("    Fix: "))
    assert "multiply q·kᵀ by 1/√head_dim exactly once" in fix
    assert lines[-2] == "    guide: plot_01_scale_bugs"


def test_long_site_names_are_shortened_in_the_middle() -> None:
    text = str(REPORTS["every bug"])
    rows = [line for line in text.split("\n") if line.startswith("model.")]
    assert len(rows) == len(BUGGY)
    for i, row in enumerate(rows):
        site = row[:32].rstrip()
        assert "…" in site and len(site) == 32
        assert site.startswith("model.encoder.") and site.endswith("_module")
        assert LONG.format(i) not in text.split("\n---")[0]
    # the 24 layers of one bug are one finding, its sites folded
    folded = "24sites:" + LONG.format("{0-23}")
    assert folded in "".join(str(REPORTS["every layer"]).split())


def test_the_table_keeps_the_sites_statistics() -> None:
    report = REPORTS["no scale"]
    lines = str(report).split("\n")
    assert lines[0] == "AttentionMonitor report: call sites 1 · errors 1 · warnings 0 · info 0"
    assert lines[1].split() == [
        *("site", "scale/ref", "logit", "sd", "max|logit|", "H/log", "n", "sat", "nonfin")
    ]
    assert lines[3].split() == ["no_scale", "8", "2.8", "12.1", "0.950", "0.00", "0"]
    assert lines[5].endswith("and every call: report.to_dataframe()")


def test_to_dataframe_has_every_column_the_text_leaves_out() -> None:
    """The old text's columns (kind, calls, head_dim, dtype, max p) and the table's."""
    frame = REPORTS["run"].to_dataframe()
    old_table = [
        *("where", "kind", "step", "head_dim", "scale_ratio", "logit_std", "max_abs_logit"),
        *("normalized_entropy", "max_probability", "saturated_fraction", "nonfinite_logits"),
        *("nonfinite_outputs", "dtype"),
    ]
    assert set(old_table) <= set(frame.columns)
    assert frame.groupby("where").size()["blocks.0.attn"] == 60  # the calls
    assert list(frame.columns[2:]) == [f.name for f in dataclasses.fields(AttentionStats)]


def test_the_chinese_edition_reads_each_part_as_one_text() -> None:
    """attnscale_tools.catalogue joins a printed paragraph's lines into one text to translate: the
    header, the measurement, the cause and the fix each come out whole, never two joined."""
    for name in ("no scale", "every layer", "sinks", "model-wide", "run", "fp16 over"):
        text = str(REPORTS[name])
        units = [unit for _, unit, _ in catalogue._units(text)]
        for part in _paragraphs(text):
            if part.startswith("[") and part not in text.split("\n"):
                continue  # a header with a site list longer than a line: code, mostly
            if part.startswith(("[", "Likely cause: ", "Fix: ", "The scores", "Measured")):
                assert part in units, f"{part!r} not one unit of {units}"


def _hand_attention(mode: str) -> nn.Module:
    class Hand(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qk = nn.Linear(256, 512)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            q, k = self.qk(x).view(2, 16, 2, 4, 64).permute(2, 0, 3, 1, 4)
            scores = q @ k.transpose(-2, -1)
            scores = scores / {"none": 1.0, "d_model": 16.0, "correct": 8.0}[mode]
            return torch.softmax(scores, dim=-1) @ q

    return Hand()


@pytest.mark.parametrize("mode", ["correct", "none", "d_model"])
def test_the_reports_of_measured_models_fit(mode: str) -> None:
    torch.manual_seed(0)
    model = nn.Sequential(*(_hand_attention(mode) for _ in range(3)))
    with torch.no_grad(), AttentionMonitor(model) as monitor:
        for layer in model:
            layer(torch.randn(2, 16, 256))
    text = str(monitor.report())
    assert max(len(line) for line in text.split("\n")) <= TEXT_WIDTH, text
    assert ("No findings." in text) == (mode == "correct")


BROKEN = """
import torch
from torch import nn


class Unscaled(nn.Module):
    def forward(self, x):
        return torch.softmax(x @ x.transpose(-2, -1), dim=-1) @ x  # no 1/sqrt(d)


def make():
    return Unscaled(), 0.1 * torch.randn(2, 4, 16, 64)
"""


def test_the_command_line_prints_the_same_text(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``python -m attnscale check`` prints the report's text, 88 columns wide."""
    from attnscale.__main__ import main

    (tmp_path / "unscaled_model.py").write_text(BROKEN)
    monkeypatch.syspath_prepend(str(tmp_path))
    with torch.random.fork_rng():
        assert main(["check", "unscaled_model:make"]) == 1
    out = capsys.readouterr().out
    lines = out.rstrip("\n").split("\n")
    assert lines[0].startswith("weights: ")
    assert lines[1].startswith("AttentionMonitor report: call sites 1")
    assert max(len(line) for line in lines) <= TEXT_WIDTH
    assert "    Likely cause: no scale at all: q·kᵀ reaches the softmax unscaled." in out


def test_a_long_header_wraps_before_its_steps_never_inside() -> None:
    """Over a run the header carries two steps; where it is too long for a line, "(first at
    run step 10)" moves to the next line whole."""
    sites = tuple(f"blocks.{i}.attn" for i in range(12))
    stats = BUGGY["collapse"]
    (lead,) = grouped([(f, stats) for s in sites for f in diagnose(s, stats, THRESHOLDS)])
    finding = dataclasses.replace(lead, step=59, first_step=10, sites=sites)
    lines = str(MonitorReport([], [finding])).split("\n")
    assert lines[2] == "[ERROR]    entropy-collapse at 12 sites: blocks.{0-11}.attn (step 59)"
    assert lines[3] == "           (first at run step 10)"
    assert "\xa0" not in str(MonitorReport([], [finding]))


def test_the_chinese_wrap_keeps_a_formula_whole() -> None:
    """The Chinese edition re-wraps a translated part: never inside ``1/√head_dim``, and at
    most 88 display columns (a CJK character takes two)."""
    # the break falls at the formula: the old wrap gave "logit 比 1/√" and "head_dim ..."
    zh = "可能的原因：" + "完全没有缩放" * 4 + "，logit 比 1/√head_dim 所预期的更宽" * 3 + "。"
    lines = catalogue.wrap(zh, "    ", "      ").split("\n")
    assert len(lines) > 1
    assert all("1/√head_dim" in line or "head_dim" not in line for line in lines)
    assert max(catalogue._width(line) for line in lines) <= TEXT_WIDTH
