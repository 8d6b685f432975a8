"""The monitor over a training run: the step, every=N, bounded history and the log hook."""

from __future__ import annotations

import itertools
import math
import weakref
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attnscale import AttentionMonitor


class Tiny(nn.Module):
    """One SDPA attention layer and a linear read-out: a model that trains in milliseconds."""

    def __init__(self, d: int = 16, heads: int = 2) -> None:
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.out = nn.Linear(d, 1)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, n, d = x.shape
        q, k, v = self.qkv(x).view(b, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, n, d)).mean()


def _train(
    monitor: AttentionMonitor,
    model: nn.Module,
    opt: torch.optim.Optimizer,
    steps: int,
    accum: int = 1,
) -> None:
    gen = torch.Generator().manual_seed(0)
    with monitor:
        for _ in range(steps):
            for _ in range(accum):
                model(torch.randn(2, 6, 16, generator=gen)).square().backward()
            opt.step()
            opt.zero_grad()


def test_every_n_optimizer_steps_and_the_log_hook() -> None:
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(model, every=3, optimizer=opt, log=logged.append)
    _train(monitor, model, opt, steps=10)
    (record,) = monitor.report().records
    assert [s.run_step for s in record.series] == [0, 3, 6, 9]
    assert monitor.step == 10
    assert [d["attn/step"] for d in logged] == [0, 3, 6, 9]
    site = record.where
    for d, s in zip(logged, record.series, strict=True):
        assert d[f"attn/{site}/max_abs_logit"] == s.max_abs_logit
        assert d[f"attn/{site}/normalized_entropy"] == s.normalized_entropy
        # logged after the optimizer step: backward has filled the gradient norm
        assert d[f"attn/{site}/logit_grad_norm"] == s.logit_grad_norm
        assert all(isinstance(v, float) and math.isfinite(v) for v in d.values())


def test_a_report_read_mid_run_stays_as_it_was() -> None:
    """A report is a snapshot: the monitor goes on measuring after it (it once kept appending
    to the report's records, so a report read at step 3 showed the statistics of step 9)."""
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    monitor = AttentionMonitor(model, every=3, optimizer=opt)
    _train(monitor, model, opt, steps=4)
    early = monitor.report()
    text = str(early)
    _train(monitor, model, opt, steps=6)
    assert [s.run_step for s in early.records[0].series] == [0, 3]
    assert str(early) == text
    assert [s.run_step for s in monitor.report().records[0].series] == [0, 3, 6, 9]


def test_gradient_accumulation_counts_optimizer_steps() -> None:
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    monitor = AttentionMonitor(model, every=2, optimizer=opt)
    _train(monitor, model, opt, steps=5, accum=3)
    (record,) = monitor.report().records
    assert [s.run_step for s in record.series] == [0, 0, 0, 2, 2, 2, 4, 4, 4]


@pytest.mark.parametrize("step_inside", [True, False])
def test_a_block_per_step_logs_every_measured_step_once(step_inside: bool) -> None:
    """Entering the monitor around each step, with the optimizer's step inside the block or
    after it: every step counts, and each measured one is logged once, with its gradients."""
    torch.manual_seed(0)
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(model, every=2, optimizer=opt, log=logged.append)
    gen = torch.Generator().manual_seed(0)
    for _ in range(7):
        with monitor:
            model(torch.randn(2, 6, 16, generator=gen)).square().backward()
            if step_inside:
                opt.step()
        if not step_inside:
            opt.step()
        opt.zero_grad()
    assert monitor.step == 7
    (record,) = monitor.report().records
    assert [s.run_step for s in record.series] == [0, 2, 4, 6]
    assert [d["attn/step"] for d in logged] == [0, 2, 4, 6]
    grad = f"attn/{record.where}/logit_grad_norm"
    assert [d[grad] for d in logged] == [s.logit_grad_norm for s in record.series]


def test_a_dropped_monitor_leaves_no_hook_on_the_optimizer() -> None:
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=1e-2)
    hooks = len(opt._optimizer_step_post_hooks)
    monitor = AttentionMonitor(model, optimizer=opt)
    with monitor:
        model(torch.randn(2, 6, 16)).backward()
    assert len(opt._optimizer_step_post_hooks) == hooks + 1  # outlives the block
    gone = weakref.ref(monitor)
    del monitor
    assert gone() is None  # freed at once: no reference cycle through the hook
    assert len(opt._optimizer_step_post_hooks) == hooks
    opt.step()


def test_without_an_optimizer_the_step_is_the_models_calls() -> None:
    model = Tiny()
    monitor = AttentionMonitor(model, every=2)
    with torch.no_grad(), monitor:
        for _ in range(5):
            model(torch.randn(2, 6, 16))
    assert [s.run_step for s in monitor.report().records[0].series] == [0, 2, 4]
    assert monitor.step == 4


def test_the_steps_the_schedule_skips_run_without_the_interception() -> None:
    """Off the schedule, the monitor's mode is off the torch-function stack: those steps pay
    nothing for it; on the measured steps it is back, and measures."""
    depth: list[int] = []

    class Probe(nn.Module):
        def forward(self, q: torch.Tensor) -> torch.Tensor:
            depth.append(torch._C._len_torch_function_stack())
            return torch.softmax(q @ q.transpose(-2, -1) * 0.5, dim=-1)

    model, base = Probe(), torch._C._len_torch_function_stack()
    monitor = AttentionMonitor(model, every=3)
    with torch.no_grad(), monitor:
        for _ in range(7):
            model(torch.randn(1, 1, 3, 4))
    assert [d - base for d in depth] == [1, 0, 0, 1, 0, 0, 1]
    assert [s.run_step for s in monitor.report().records[0].series] == [0, 3, 6]
    assert torch._C._len_torch_function_stack() == base


def test_history_stays_bounded_over_ten_thousand_steps() -> None:
    """10,000 monitored calls, 64 points kept, evenly spread over the whole run."""

    class Scores(nn.Module):
        def forward(self, q: torch.Tensor) -> torch.Tensor:
            return torch.softmax(q @ q.transpose(-2, -1) * 0.5, dim=-1)

    model, q = Scores(), torch.randn(1, 1, 3, 4)
    monitor = AttentionMonitor(model, history=64, gradients=False)
    with torch.no_grad(), monitor:
        for _ in range(10_000):
            model(q)
    series = monitor.report().records[0].series
    steps = [s.run_step for s in series]
    assert len(series) <= 64
    assert steps[0] == 0 and steps[-1] >= 10_000 - 10_000 // 32
    gaps = {b - a for a, b in itertools.pairwise(steps)}
    assert len(gaps) == 1  # one spacing over the whole run


def test_every_row_statistics_and_qk_clip_factors_are_logged() -> None:
    model = Tiny()
    with torch.no_grad():
        model.qkv.weight.mul_(40)  # logits far past tau
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(model, all_rows=True, log=logged.append, qk_clip_tau=5.0)
    with torch.no_grad(), monitor:
        model(torch.randn(2, 6, 16))
    (record,) = monitor.report().records
    heads = record.last.heads
    assert heads is not None
    (d,) = logged
    for h, s_max in enumerate(heads["max_logit"]):
        assert s_max is not None
        assert d[f"attn/{record.where}/head{h}/max_logit"] == s_max
        assert d[f"attn/{record.where}/head{h}/qk_clip"] == pytest.approx(min(1.0, 5.0 / s_max))
        assert d[f"attn/{record.where}/head{h}/entropy"] == heads["entropy"][h]
    assert d[f"attn/{record.where}/max_logit"] == max(heads["max_logit"])  # type: ignore[type-var]


@pytest.mark.parametrize(
    ("kwargs", "error", "names"),
    [
        ({"every": 0}, ValueError, "every"),
        ({"history": 1}, ValueError, "history"),
        ({"optimizer": "adam"}, TypeError, "optimizer"),
        ({"log": 3}, TypeError, "log"),
        ({"qk_clip_tau": -1.0}, ValueError, "qk_clip_tau"),
        ({"max_sampled_logits": 0}, ValueError, "max_sampled_logits"),
    ],
)
def test_bad_run_arguments_name_the_argument(
    kwargs: dict[str, Any], error: type[Exception], names: str
) -> None:
    with pytest.raises(error, match=names):
        AttentionMonitor(Tiny(), **kwargs)


def test_a_saved_report_loads_back() -> None:
    """MonitorReport.from_dict(json of to_dict): the same dict, text and findings."""
    import json

    from attnscale import MonitorReport

    model = Tiny()
    with torch.no_grad():
        model.qkv.weight.mul_(30)  # large logits: findings to save
    monitor = AttentionMonitor(model, all_rows=True, expected_scale=0.01)
    with monitor:
        model(torch.randn(2, 6, 16)).backward()
    report = monitor.report()
    assert report.findings
    saved = json.loads(json.dumps(report.to_dict()))
    loaded = MonitorReport.from_dict(saved)
    assert loaded.to_dict() == saved
    assert str(loaded) == str(report)
    assert loaded.codes() == report.codes()
    assert loaded.records[0].last.shape == report.records[0].last.shape  # a tuple again
    with pytest.raises(ValueError, match="unknown AttentionStats fields"):
        MonitorReport.from_dict(
            {**saved, "records": [{**saved["records"][0], "series": [{"x": 1}]}]}
        )


def test_every_measured_step_is_logged_even_when_history_drops_it() -> None:
    model = Tiny()
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(model, history=2, log=logged.append)
    with torch.no_grad(), monitor:
        for _ in range(6):
            model(torch.randn(2, 6, 16))
    assert len(monitor.report().records[0].series) <= 2
    assert [d["attn/step"] for d in logged] == [0, 1, 2, 3, 4, 5]


def test_findings_over_a_run_carry_the_step_they_first_appeared() -> None:
    model = Tiny()
    monitor = AttentionMonitor(model, gradients=False)
    gen = torch.Generator().manual_seed(0)
    with torch.no_grad(), monitor:
        for step in range(6):
            size = 0.1 if step < 3 else 300.0  # logits explode from step 3 on
            model(size * torch.randn(2, 6, 16, generator=gen))
    report = monitor.report()
    large = next(f for f in report.findings if f.code == "large-logits")
    assert large.first_step == 3
    assert "first at run step 3" in str(report)
    single = AttentionMonitor(model)
    with torch.no_grad(), single:
        model(300.0 * torch.randn(2, 6, 16, generator=gen))
    assert all(f.first_step is None for f in single.report().findings)  # one step: no date


def test_report_as_a_dataframe_has_one_row_per_measured_call() -> None:
    pd = pytest.importorskip("pandas")  # in the test extra: runs in CI
    model = Tiny()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    with AttentionMonitor(model, all_rows=True, every=2, optimizer=opt) as monitor:
        for _ in range(5):
            model(torch.randn(2, 6, 16)).square().mean().backward()
            opt.step()
            opt.zero_grad()
    report = monitor.report()
    frame = report.to_dataframe()
    assert isinstance(frame, pd.DataFrame)
    (record,) = report.records
    assert list(frame["run_step"]) == [s.run_step for s in record.series] == [0, 2, 4]
    assert list(frame.columns[:3]) == ["where", "kind", "step"]
    assert (frame["where"] == record.where).all()
    assert list(frame["max_abs_logit"]) == record.values("max_abs_logit")
    assert frame["heads"].iloc[-1] == record.last.heads


def test_dataframe_without_pandas_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    model = Tiny()
    with AttentionMonitor(model) as monitor:
        model(torch.randn(2, 6, 16))
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ImportError, match="pip install pandas"):
        monitor.report().to_dataframe()


def test_nothing_outside_the_models_is_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    """The loss and the optimizer's update run outside every module: a monitor given its
    models follows no lineage there (it would cost a step's worth of work), and still reads
    the scale applied inside."""
    from attnscale._monitor.lineage import Lineages

    followed: list[bool] = []
    follow = Lineages.follow

    def counting(self: Lineages, *args: Any) -> None:
        from attnscale._monitor.hooks import REGISTRY

        followed.append(bool(REGISTRY.stack))
        follow(self, *args)

    monkeypatch.setattr(Lineages, "follow", counting)
    model = Tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, foreach=False)  # many scalar ops
    with AttentionMonitor(model, optimizer=opt) as monitor:
        for _ in range(3):
            (model(torch.randn(2, 6, 16)) * 0.5).backward()  # a scaled loss, outside
            opt.step()
            opt.zero_grad()
    assert followed and all(followed)  # inside the model only
    assert monitor.report().records[0].last.scale_ratio == pytest.approx(1.0)
