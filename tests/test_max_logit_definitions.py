"""The max-logit definitions of Megatron-LM, Transformer Engine, cuDNN, Kimi K2 and this library,
on one causal example where they disagree; and the monitor's logged values against its rows."""

from __future__ import annotations

import math
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from attnscale import AttentionMonitor
from attnscale._monitor.metric_names import DEFINITIONS, max_logit

M = 5.0  # a masked entry (above the diagonal): every definition must ignore it
# (batch 2, heads 2, 4 query rows, 4 keys), causal. Head 0 is negative-dominated: every logit a
# query sees is below 0, the largest in size is -9. Head 1 has one masked entry of +50.
LOGITS = [
    [
        [[-1.5, M, M, M], [-9.0, -0.5, M, M], [-2.0, -3.0, -4.0, M], [-1.0, -6.0, -2.5, -0.75]],
        [[-2.125, M, M, 50.0], [-3.0, -2.25, M, M], [-4.0, -5.0, -2.5, M], [-3.5, -2.75, -6, -4]],
    ],
    [
        [[-0.25, M, M, M], [-1.0, -8.0, M, M], [-3.0, -0.5, -1.25, M], [-2.0, -2.0, -7.0, -1.5]],
        [[-2.5, M, M, M], [-3.25, -4.0, M, M], [-2.75, -6.5, -3.0, M], [-5.0, -3.5, -2.0, -4.5]],
    ],
]
BATCH, HEADS, ROWS = 2, 2, 4
CAUSAL = torch.ones(ROWS, ROWS, dtype=torch.bool).triu(1)  # True: masked


def _seen(b: int, h: int, i: int) -> list[float]:
    """What query ``i`` of head ``h`` sees: keys 0..i."""
    return [float(LOGITS[b][h][i][j]) for j in range(i + 1)]


def _by_hand() -> dict[str, Any]:
    per_row = [[[max(_seen(b, h, i)) for i in range(ROWS)] for h in range(HEADS)] for b in range(2)]
    per_head = []
    for h in range(HEADS):
        best = -math.inf
        for b in range(BATCH):
            for i in range(ROWS):
                for v in _seen(b, h, i):
                    best = v if v > best else best
        per_head.append(best)
    largest_size = 0.0
    for b in range(BATCH):
        for h in range(HEADS):
            for i in range(ROWS):
                largest_size = max([largest_size, *map(abs, _seen(b, h, i))])
    return {
        "attnscale": per_head,
        "attnscale-sampled": largest_size,
        "megatron": max(0.0, *per_head),  # Megatron's running max starts at 0
        "transformer-engine": per_head,
        "cudnn": per_row,
        "kimi": per_head,
    }


def test_the_example_separates_the_definitions() -> None:
    hand = _by_hand()
    assert hand["attnscale"] == [-0.25, -2.0]  # signed: both heads below 0
    assert hand["attnscale-sampled"] == 9.0  # absolute: head 0's -9
    assert hand["megatron"] == 0.0  # clamped
    masked_in = torch.tensor(LOGITS).amax().item()
    assert masked_in == 50.0  # what any definition that let masked entries in would report


@pytest.mark.parametrize("row", [d for d in DEFINITIONS if d.per is not None], ids=lambda d: d.name)
def test_each_definition_matches_a_hand_computation(row: Any) -> None:
    expected = _by_hand()[row.name]
    got = max_logit(row, torch.tensor(LOGITS), CAUSAL)
    assert got.tolist() == expected
    assert max_logit(row.name, torch.tensor(LOGITS), CAUSAL).tolist() == expected


def test_every_row_names_its_source_and_torchtitan_logs_none() -> None:
    assert {d.name for d in DEFINITIONS} >= {"megatron", "cudnn", "kimi", "torchtitan"}
    assert all(d.source.startswith("https://") for d in DEFINITIONS)
    (titan,) = [d for d in DEFINITIONS if d.name == "torchtitan"]
    assert titan.key is None
    with pytest.raises(ValueError, match="torchtitan logs no max"):
        max_logit("torchtitan", torch.tensor(LOGITS))


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("nvidia", torch.tensor(LOGITS)), ValueError, "definition must be"),
        (("kimi", torch.zeros(4, 4)), ValueError, "4-D"),
        (("kimi", LOGITS), TypeError, "logits must be a tensor"),
        (("kimi", torch.tensor(LOGITS), CAUSAL.float()), TypeError, "masked must be a boolean"),
    ],
)
def test_bad_input_names_the_argument(args: tuple[Any, ...], error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        max_logit(*args)


class Fixed(nn.Module):
    """Attention whose logits are the example's: q = 2·logits, k = I, scale 1/√4 (exact)."""

    def __init__(self, eager: bool) -> None:
        super().__init__()
        self.eager = eager

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        if not self.eager:
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
        return scores.masked_fill(CAUSAL, -math.inf).softmax(-1) @ v


@pytest.mark.parametrize("eager", [False, True], ids=["sdpa", "hand-written"])
def test_the_logged_values_follow_their_rows(eager: bool) -> None:
    logits = torch.tensor(LOGITS)
    q = 2 * logits  # (batch, heads, rows, d = 4)
    k = torch.eye(ROWS).expand(BATCH, HEADS, ROWS, ROWS)
    v = torch.randn(BATCH, HEADS, ROWS, ROWS, generator=torch.Generator().manual_seed(0))
    model = Fixed(eager)
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(model, all_rows=True, log=logged.append, log_names="megatron")
    with torch.no_grad(), monitor:
        model(q, k, v)
    (record,) = monitor.report().records
    (d,) = logged
    site = f"attn/{record.where}"
    ours = max_logit("attnscale", logits, CAUSAL).tolist()
    assert [d[f"{site}/head{h}/max_logit"] for h in range(HEADS)] == pytest.approx(ours)
    sampled = max_logit("attnscale-sampled", logits, CAUSAL).item()
    assert d[f"{site}/max_abs_logit"] == pytest.approx(sampled)
    assert d["max_attention_logit"] == max_logit("megatron", logits, CAUSAL).item() == 0.0


def test_megatron_key_only_when_asked() -> None:
    model = Fixed(eager=False)
    logged: list[dict[str, float]] = []
    with torch.no_grad(), AttentionMonitor(model, all_rows=True, log=logged.append):
        model(2 * torch.tensor(LOGITS), torch.eye(ROWS).expand(2, 2, 4, 4), torch.ones(2, 2, 4, 4))
    (d,) = logged
    assert "max_attention_logit" not in d


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"log_names": 3, "all_rows": True}, TypeError, "log_names must be a string"),
        ({"log_names": "wandb", "all_rows": True}, ValueError, "log_names must be one of"),
        ({"log_names": "megatron"}, ValueError, "needs all_rows=True"),
    ],
)
def test_bad_log_names_say_what_is_expected(
    kwargs: dict[str, Any], error: type, match: str
) -> None:
    with pytest.raises(error, match=match):
        AttentionMonitor(nn.Linear(2, 2), **kwargs)


class Projected(nn.Module):
    """One causal SDPA layer with its own projections."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).view(2, 6, 3, 2, 8).permute(2, 0, 3, 1, 4)
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)


def test_micro_batches_of_one_step_combine_as_megatron_and_qk_clip_do() -> None:
    """With gradient accumulation the logged max logit covers every micro-batch of the step
    (it once covered the last one only): the largest of maxima, the smallest QK-Clip factor."""
    torch.manual_seed(0)
    model = Projected()
    opt = torch.optim.SGD(model.parameters(), lr=0.0)
    logged: list[dict[str, float]] = []
    monitor = AttentionMonitor(model, all_rows=True, optimizer=opt, log=logged.append)
    with monitor:
        for size in (1.0, 8.0, 2.0):  # the middle micro-batch has the largest logits
            model(size * torch.randn(2, 6, 16)).sum().backward()
        opt.step()
    (record,) = monitor.report().records
    assert len(record.series) == 3
    (d,) = logged
    site = f"attn/{record.where}"
    for h in range(2):
        calls = [s.heads["max_logit"][h] for s in record.series]  # type: ignore[index]
        assert d[f"{site}/head{h}/max_logit"] == max(calls) != calls[-1]
    entropies = [s.normalized_entropy for s in record.series]
    assert d[f"{site}/normalized_entropy"] == pytest.approx(sum(entropies) / 3)
