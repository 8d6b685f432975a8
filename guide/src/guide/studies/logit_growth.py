r"""Attention logit growth in a small language model (Wortsman et al. 2023, arXiv:2309.14322).

A byte-level causal language model (two pre-LayerNorm blocks of width 128, four heads of 32,
context 64) trained on real English text that ships with every CPython: the help topics of
the Python reference (``pydoc_data.topics``, joined in key order; its SHA-256 and the Python
version are stored with the results). The recipe follows Wortsman et al.: AdamW
($\beta = (0.9, 0.95)$), linear warmup over the first 10% of the steps then cosine decay,
z-loss $10^{-4} \log^2 Z$ on the output softmax, and weight decay $10^{-4}$ per step on the
weight matrices, independent of the learning rate. Learning rates from $10^{-4}$ to $1$, half
a decade apart, three seeds, with $1/\sqrt{d_k}$ alone (the baseline) and with QK-LayerNorm.
Kept per run and step: the language-model loss, the largest attention logit of each layer, and
the mean normalised attention entropy; at the end, the loss on held-out text.
"""

from __future__ import annotations

import hashlib
import math
import platform
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from attnscale import AttentionBlock

from .. import stored
from . import MODEL_CODE

FULL: dict[str, Any] = {
    "variants": ["inverse_sqrt", "qk_layernorm"],
    "halves": list(range(-8, 1)),  # half-decade exponents: 1e-4 to 1
    "seeds": [0, 1, 2],
    "steps": 2000,
    "stop_after": 2000,
    "warmup": 200,
    "d_model": 128,
    "layers": 2,
    "heads": 4,
    "context": 64,
    "batch_size": 16,
    "z_loss": 1e-4,
    "weight_decay": 1e-4,  # per step, times the schedule; not times the learning rate
    "eval_batches": 32,
}
#: The build's rerun: the first steps of one of the same runs (same schedule, same batches).
REDUCED: dict[str, Any] = {
    **FULL,
    "variants": ["inverse_sqrt"],
    "halves": [-4],
    "seeds": [0],
    "stop_after": 100,
    "eval_batches": 4,
}
VOCAB = 256  # bytes


def corpus() -> tuple[torch.Tensor, str]:
    """The UTF-8 bytes of CPython's ``pydoc_data.topics`` in key order, and their SHA-256."""
    import pydoc_data.topics

    topics = pydoc_data.topics.topics
    raw = "".join(topics[k] for k in sorted(topics)).encode()
    return torch.frombuffer(bytearray(raw), dtype=torch.uint8).long(), hashlib.sha256(
        raw
    ).hexdigest()


class TinyLM(nn.Module):
    """Byte embedding and learned positions, causal pre-LN blocks, final LayerNorm, linear head."""

    def __init__(self, budget: dict[str, Any], strategy: str, softcap: float | None = None) -> None:
        super().__init__()
        d, ctx = budget["d_model"], budget["context"]
        self.embed = nn.Embedding(VOCAB, d)
        self.position = nn.Embedding(ctx, d)
        self.blocks = nn.ModuleList(
            AttentionBlock(d, budget["heads"], strategy=strategy, softcap=softcap)
            for _ in range(budget["layers"])
        )
        self.norm = nn.LayerNorm(d)
        self.head = nn.Linear(d, VOCAB, bias=False)

    def forward(
        self, tokens: torch.Tensor, *, watch: bool = False
    ) -> tuple[torch.Tensor, list[torch.Tensor], list[torch.Tensor]]:
        """Next-byte logits ``(batch, length, 256)``; with ``watch``, per layer and head the
        largest attention logit over the keys each query sees, and per layer the mean normalised
        entropy."""
        length = tokens.shape[1]
        h = self.embed(tokens) + self.position.weight[:length]  # (batch, length, d_model)
        seen = torch.ones(length, length, dtype=torch.bool, device=tokens.device).tril()
        max_logits, entropies = [], []
        for block in self.blocks:
            res = block(h, is_causal=True, need_weights=watch, need_logits=watch)
            h = res.output
            if watch:
                assert res.logits is not None and res.weights is not None
                with torch.no_grad():
                    logits = res.logits.masked_fill(~seen, -math.inf)  # (batch, heads, L, L)
                    max_logits.append(logits.amax(dim=(0, 2, 3)))  # (heads,)
                    w = res.weights[..., 1:, :]  # rows with at least two keys
                    ent = -(w * w.clamp_min(1e-30).log()).sum(-1)  # (batch, heads, L - 1)
                    keys = torch.arange(2, length + 1, device=tokens.device).log()  # (L - 1,)
                    entropies.append((ent / keys).mean())
        return self.head(self.norm(h)), max_logits, entropies


def batch(
    data: torch.Tensor, size: int, context: int, gen: torch.Generator
) -> tuple[torch.Tensor, torch.Tensor]:
    """``size`` random windows of ``context`` tokens from ``data``: inputs and next-token targets."""
    start = torch.randint(0, data.numel() - context - 1, (size,), generator=gen)
    window = start[:, None] + torch.arange(context + 1)  # (batch, context + 1)
    chunk = data[window]
    return chunk[:, :-1], chunk[:, 1:]


def adamw(params: list[nn.Parameter], lr: float, budget: dict[str, Any]) -> torch.optim.AdamW:
    """The recipe's AdamW: weight decay on the matrices only, per step, not times the rate."""
    return torch.optim.AdamW(
        [
            {
                "params": [p for p in params if p.dim() >= 2],
                "weight_decay": budget["weight_decay"] / lr,
            },
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=lr,
        betas=(0.9, 0.95),
        eps=1e-8,
    )


def train_lm(
    budget: dict[str, Any],
    strategy: str,
    lr: float,
    seed: int,
    device: str,
    *,
    softcap: float | None = None,
    prepare: Callable[[TinyLM], None] | None = None,
    optimizers: Callable[[TinyLM, float, dict[str, Any]], list[torch.optim.Optimizer]]
    | None = None,
    after_step: Callable[[TinyLM, list[torch.Tensor]], None] | None = None,
) -> dict[str, Any]:
    """One run: per-step loss, largest attention logit per layer and entropy, final held-out loss.

    A run whose loss becomes non-finite stops there; its remaining steps are NaN. The keywords
    change the recipe (``guide.studies.logit_fixes``): a soft-cap of the attention logits;
    ``prepare`` the model after initialisation (with the run's seed); ``optimizers`` in place of
    [adamw][]; ``after_step`` acting on the weights after each step, given the step's largest
    logit per layer and head.
    """
    data, _ = corpus()
    split = int(0.9 * data.numel())
    train_data, held_out = data[:split], data[split:]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = TinyLM(budget, strategy, softcap).to(device)
        if prepare is not None:
            prepare(model)
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    if optimizers is None:
        opts: list[torch.optim.Optimizer] = [adamw(list(model.parameters()), lr, budget)]
    else:
        opts = optimizers(model, lr, budget)
    steps, warmup = budget["steps"], budget["warmup"]

    def schedule(t: int) -> float:  # multiplier of step t + 1
        if t < warmup:
            return (t + 1) / warmup  # type: ignore[no-any-return]
        return 0.5 * (1 + math.cos(math.pi * (t - warmup) / (steps - warmup)))

    scheds = [torch.optim.lr_scheduler.LambdaLR(opt, schedule) for opt in opts]
    n = budget["stop_after"]
    layers = budget["layers"]
    loss_rec = np.full(n, np.nan, dtype=np.float32)
    logit_rec = np.full((n, layers), np.nan, dtype=np.float32)
    entropy_rec = np.full((n, layers), np.nan, dtype=np.float32)
    for t in range(n):
        x, y = (
            v.to(device) for v in batch(train_data, budget["batch_size"], budget["context"], gen)
        )
        logits, max_logits, entropies = model(x, watch=True)
        flat = logits.reshape(-1, VOCAB)
        loss = F.cross_entropy(flat, y.reshape(-1))
        z = torch.logsumexp(flat, dim=-1)
        total = loss + budget["z_loss"] * z.square().mean()
        loss_rec[t] = float(loss.detach())
        logit_rec[t] = torch.stack(max_logits).amax(-1).float().cpu().numpy()
        entropy_rec[t] = torch.stack(entropies).float().cpu().numpy()
        if not math.isfinite(loss_rec[t]):
            break
        for opt in opts:
            opt.zero_grad(set_to_none=True)
        total.backward()
        for opt in opts:
            opt.step()
        if after_step is not None:
            with torch.no_grad():
                after_step(model, max_logits)
        for sched in scheds:
            sched.step()
    eval_gen = torch.Generator().manual_seed(12345)
    with torch.no_grad():
        losses = []
        for _ in range(budget["eval_batches"]):
            x, y = (
                v.to(device)
                for v in batch(held_out, budget["batch_size"], budget["context"], eval_gen)
            )
            logits = model(x)[0]
            losses.append(float(F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))))
    return {
        "loss": loss_rec,
        "max_logit": logit_rec,
        "entropy": entropy_rec,
        "held_out": float(np.mean(losses)) if all(math.isfinite(v) for v in losses) else math.nan,
    }


def parts(budget: dict[str, Any]) -> list[str]:
    return [f"{v}_lr{k}" for v in budget["variants"] for k in budget["halves"]]


def run_part(part: str, budget: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    strategy, k = part.rsplit("_lr", 1)
    lr = 10 ** (int(k) / 2)
    return stack([train_lm(budget, strategy, lr, s, device) for s in budget["seeds"]], budget)


def run_variant(
    part: str,
    budget: dict[str, Any],
    device: str,
    recipe: Callable[[str, dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]],
) -> dict[str, np.ndarray]:
    """A part ``VARIANT_lrK`` of a study that changes the recipe: one run per seed at
    η = 10^(K/2) with 1/√d_k, on the budget and ``train_lm`` keywords that
    ``recipe(variant, budget)`` gives."""
    variant, k = part.rsplit("_lr", 1)
    run_budget, keywords = recipe(variant, budget)
    lr = 10 ** (int(k) / 2)
    runs = [
        train_lm(run_budget, "inverse_sqrt", lr, s, device, **keywords) for s in budget["seeds"]
    ]
    return stack(runs, budget)


def stack(runs: list[dict[str, Any]], budget: dict[str, Any]) -> dict[str, np.ndarray]:
    """One part's arrays from its runs (one per seed), with the corpus digest and Python."""
    _, digest = corpus()
    return {
        "loss": np.stack([r["loss"] for r in runs]),  # (seeds, steps)
        "max_logit": np.stack([r["max_logit"] for r in runs]),  # (seeds, steps, layers)
        "entropy": np.stack([r["entropy"] for r in runs]),  # (seeds, steps, layers)
        "held_out": np.array([r["held_out"] for r in runs]),  # (seeds,)
        "seeds": np.array(budget["seeds"]),
        "corpus_sha256": np.array(digest),
        "python": np.array(platform.python_version()),
    }


#: ``part/array`` -> [Tolerance][guide.stored.Tolerance] within which a fingerprint
#: rerun on another arithmetic must reproduce the stored values. Measured with ``python -m
#: guide.stored spread logit_growth`` on an Intel Xeon with AVX-512, 2026-12-05,
#: across six arithmetics (default; MKL_CBWR=COMPATIBLE; ATEN_CPU_CAPABILITY=avx2 and =default;
#: 2 and 3 threads) and with every Adam step 1% larger (planted): the largest logit moved most
#: (by 4.5e-5 of its norm, 0.015 of its tolerance below); the planted change moved the entropy
#: by 27 times its tolerance.
TOLERANCES: stored.Tolerances = {
    "*/max_logit": stored.Tolerance(3e-3, 1e-6),
    "*": stored.Tolerance(1e-4, 1e-8),
}


def agree(full: stored.Stored, live: dict[str, dict[str, np.ndarray]]) -> list[stored.Check]:
    """The rerun's first steps reproduce the stored run: the same corpus, and per seed the loss
    and each layer's largest attention logit at the last rerun step within 1%."""
    kept_text = {str(full.parts[part]["corpus_sha256"]) for part in live}
    now_text = {str(now["corpus_sha256"]) for now in live.values()}
    checks = [  # one row for every part: they all read the same text
        stored.Check(
            "corpus (pydoc_data.topics) SHA-256",
            ", ".join(sorted(h[:12] for h in kept_text)),
            ", ".join(sorted(h[:12] for h in now_text)),
            "equal",
            len(kept_text | now_text) == 1,
        )
    ]
    for part, now in live.items():
        kept = full.parts[part]
        t = now["loss"].shape[1] - 1
        for c, s in enumerate(now["seeds"]):
            fc = list(kept["seeds"]).index(s)
            checks.append(
                stored.close(
                    f"{part}, seed {int(s)}: loss at step {t + 1}",
                    float(kept["loss"][fc, t]),
                    float(now["loss"][c, t]),
                    rtol=0.01,
                )
            )
            for layer in range(now["max_logit"].shape[2]):
                checks.append(
                    stored.close(
                        f"{part}, seed {int(s)}: largest logit of layer {layer + 1} at step {t + 1}",
                        float(kept["max_logit"][fc, t, layer]),
                        float(now["max_logit"][c, t, layer]),
                        rtol=0.01,
                    )
                )
    return checks


EXPERIMENT = stored.Experiment(
    name="logit_growth",
    parts=parts,
    run_part=run_part,
    full=FULL,
    reduced=REDUCED,
    agree=agree,
    uses=MODEL_CODE,
)
