"""Two processes on gloo (CPU): each measures its own batches; the log hook gets the
statistics combined across processes, the same on both."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch import nn
from torch.nn import functional as F

from attnscale import AttentionMonitor

pytestmark = pytest.mark.skipif(
    not dist.is_available() or sys.platform == "win32", reason="needs torch.distributed"
)


class Tiny(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v).square().mean()


def _worker(rank: int, folder: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    torch.manual_seed(0)
    model = nn.parallel.DistributedDataParallel(Tiny())
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    logged: list[dict[str, float]] = []
    # only rank 0 logs, as with wandb; rank 1 still takes part in the reduction
    monitor = AttentionMonitor(
        model, every=2, optimizer=opt, log=logged.append if rank == 0 else None
    )
    gen = torch.Generator().manual_seed(rank)
    with monitor:
        for _ in range(4):
            model((1 + 3 * rank) * torch.randn(2, 6, 16, generator=gen)).backward()
            opt.step()
            opt.zero_grad()
    own = [s.to_dict() for s in monitor.report().records[0].series]
    Path(folder, f"rank{rank}.json").write_text(json.dumps({"logged": logged, "own": own}))
    dist.barrier()  # neither process tears gloo down while the other still uses it (seen: SIGABRT)
    dist.destroy_process_group()


def test_statistics_are_combined_across_processes(tmp_path: Path) -> None:
    try:
        mp.spawn(_worker, args=(str(tmp_path),), nprocs=2, join=True)
    except mp.ProcessExitedException as err:
        # About one run in thirty, a rank aborts in gloo's teardown ("terminate called without
        # an active exception") after both wrote their results; the results are still judged
        # below. An abort before that leaves a file missing, and fails here.
        written = all((tmp_path / f"rank{r}.json").exists() for r in (0, 1))
        if err.signal_name != "SIGABRT" or not written:
            raise
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    assert r1["logged"] == []
    assert [d["attn/step"] for d in r0["logged"]] == [0, 2]
    site = "module"
    for d, a, b in zip(r0["logged"], r0["own"], r1["own"], strict=True):
        assert d[f"attn/{site}/max_abs_logit"] == max(a["max_abs_logit"], b["max_abs_logit"])
        assert a["max_abs_logit"] != b["max_abs_logit"]  # the ranks saw different data
        assert d[f"attn/{site}/min_head_normalized_entropy"] == min(
            a["min_head_normalized_entropy"], b["min_head_normalized_entropy"]
        )
        mean = (a["normalized_entropy"] + b["normalized_entropy"]) / 2
        assert d[f"attn/{site}/normalized_entropy"] == pytest.approx(mean)


class Layers(nn.Module):
    """Three attention layers, and a fourth (``extra``) that runs only when asked: a site that
    one process meets and the other does not."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Tiny() for _ in range(3))
        self.extra = Tiny()

    def forward(self, x: torch.Tensor, extra: bool = False) -> torch.Tensor:
        loss = sum(block(x) for block in self.blocks)
        return loss + self.extra(x) if extra else loss


_COLLECTIVES = ("all_reduce", "all_gather", "all_gather_object", "broadcast", "reduce", "gather")


def _counting_worker(rank: int, folder: str) -> None:
    dist.init_process_group("gloo", init_method=f"file://{folder}/store", rank=rank, world_size=2)
    calls: list[str] = []
    for name in _COLLECTIVES:  # every collective called through torch.distributed, recorded
        real = getattr(dist, name)

        def counted(*args: object, _real: object = real, _name: str = name, **kw: object) -> object:
            op = kw.get("op")
            calls.append(_name if op is None else f"{_name} {str(op).rsplit('.', 1)[-1]}")
            return _real(*args, **kw)  # type: ignore[operator]

        setattr(dist, name, counted)
    torch.manual_seed(0)
    model = Layers()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(model, all_rows=True, optimizer=opt, log=logged.append)
    per_step, gen = [], torch.Generator().manual_seed(rank)
    with monitor:
        for step in range(4):
            # the extra site runs on process 1 at step 2 only
            model(torch.randn(2, 6, 16, generator=gen), extra=rank == 1 and step == 2).backward()
            start = len(calls)
            opt.step()  # the measured step ends here: the reduction runs
            opt.zero_grad()
            per_step.append(calls[start:])
    extra = [r for r in monitor.report().records if r.where == "extra"]
    own = [s.to_dict() for r in extra for s in r.series]
    result = {"calls": per_step, "logged": logged, "extra": own}
    Path(folder, f"rank{rank}.json").write_text(json.dumps(result))
    dist.barrier()
    dist.destroy_process_group()


def test_one_collective_per_reduction_kind_per_step_for_every_site(tmp_path: Path) -> None:
    try:
        mp.spawn(_counting_worker, args=(str(tmp_path),), nprocs=2, join=True)
    except mp.ProcessExitedException as err:  # gloo's rare teardown abort: see above
        written = all((tmp_path / f"rank{r}.json").exists() for r in (0, 1))
        if err.signal_name != "SIGABRT" or not written:
            raise
    r0, r1 = (json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1))
    steady = ["all_reduce MAX", "all_reduce SUM"]
    for r in (r0, r1):
        # the first step agrees on the keys; then four sites cost two collectives, not one each
        assert r["calls"][0] == ["all_gather_object", *steady]
        assert r["calls"][1] == r["calls"][3] == steady
        # step 2: process 1 met a new site; its flag in the MAX tensor makes both agree again
        assert r["calls"][2] == ["all_reduce MAX", "all_gather_object", *steady]
    assert r0["logged"] == r1["logged"]
    assert [d["attn/step"] for d in r0["logged"]] == [0, 1, 2, 3]
    (alone,) = r1["extra"]  # the extra site's statistics are process 1's alone, not halved
    at_2 = r0["logged"][2]
    assert at_2["attn/extra/normalized_entropy"] == alone["normalized_entropy"]
    assert at_2["attn/extra/head0/max_logit"] == alone["heads"]["max_logit"][0]
    assert r0["extra"] == []
    assert not any(k.startswith("attn/extra/") for k in r0["logged"][3])  # nobody sent it
    sites = {k.split("/")[1] for k in r0["logged"][1] if k != "attn/step"}
    assert sites == {"blocks.0", "blocks.1", "blocks.2"}
