r"""A small language model trained to convergence: the monitor's calibration on trained heads.

Trained heads are legitimately sharp (previous-token and induction heads), which a freshly
initialised model never shows. This study trains `transformers`' own GPT-2 (its code, a small
config: 2 layers, 4 heads, width 128, byte vocabulary, context 64) on the bytes of CPython's
``pydoc_data.topics`` (the corpus of the logit-growth study: it ships with every Python, so
nothing is downloaded) for 4,000 AdamW steps with a cosine schedule, and stores the trained
weights (1.7 MB) with the loss curve and the held-out loss. The monitor's false-positive rate
on a healthy trained model, and whether planted bugs are still caught on it, are measured on
this checkpoint.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

from .. import stored
from . import logit_growth

FULL: dict[str, Any] = {
    "seeds": [0],
    "steps": 4000,
    "stop_after": 4000,
    "warmup": 200,
    "lr": 3e-3,
    "weight_decay": 0.01,
    "d_model": 128,
    "layers": 2,
    "heads": 4,
    "context": 64,
    "batch_size": 16,
    "eval_batches": 32,
}
#: The build's rerun: the first steps of the same run (same initial weights and batches).
REDUCED: dict[str, Any] = {**FULL, "stop_after": 40, "eval_batches": 2}
VOCAB = 256  # bytes
PARAM = "param:"  # prefix of the stored weights' array names


def gpt2(budget: dict[str, Any]) -> torch.nn.Module:
    """transformers' GPT2LMHeadModel at the study's size (random weights), its SDPA attention."""
    from transformers import GPT2Config, GPT2LMHeadModel  # type: ignore[import-not-found,unused-ignore]

    config = GPT2Config(
        vocab_size=VOCAB,
        n_positions=budget["context"],
        n_embd=budget["d_model"],
        n_layer=budget["layers"],
        n_head=budget["heads"],
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        bos_token_id=None,  # GPT-2's 50256 is outside a byte vocabulary
        eos_token_id=None,
    )
    return GPT2LMHeadModel(config)  # type: ignore[no-any-return,unused-ignore]


def train(budget: dict[str, Any], seed: int, device: str) -> dict[str, np.ndarray]:
    """One run: the per-step training loss, the held-out loss, and the trained weights."""
    data, _ = logit_growth.corpus()
    split = int(0.9 * data.numel())
    train_data, held_out = data[:split], data[split:]
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = gpt2(budget).to(device)
    gen = torch.Generator().manual_seed(seed + 1_000_003)
    opt = torch.optim.AdamW(
        model.parameters(), lr=budget["lr"], betas=(0.9, 0.95), weight_decay=budget["weight_decay"]
    )
    steps, warmup = budget["steps"], budget["warmup"]

    def schedule(t: int) -> float:  # multiplier of step t + 1
        if t < warmup:
            return (t + 1) / warmup  # type: ignore[no-any-return]
        return 0.5 * (1 + math.cos(math.pi * (t - warmup) / (steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    losses = np.full(budget["stop_after"], np.nan, dtype=np.float32)
    for t in range(budget["stop_after"]):
        x, y = (
            v.to(device)
            for v in logit_growth.batch(train_data, budget["batch_size"], budget["context"], gen)
        )
        loss = F.cross_entropy(model(x).logits.reshape(-1, VOCAB), y.reshape(-1))
        losses[t] = float(loss.detach())
        opt.zero_grad(set_to_none=True)
        loss.backward()  # type: ignore[no-untyped-call]
        opt.step()
        sched.step()
    return {
        "loss": losses,
        "held_out": np.array(held_out_loss(model, held_out, budget, device)),
        **{PARAM + k: v.detach().cpu().numpy() for k, v in model.state_dict().items()},
    }


def held_out_loss(
    model: torch.nn.Module, held_out: torch.Tensor, budget: dict[str, Any], device: str
) -> float:
    """Mean next-byte cross-entropy (nats) on fixed batches of the held-out tenth."""
    gen = torch.Generator().manual_seed(12345)
    losses = []
    with torch.no_grad():
        for _ in range(budget["eval_batches"]):
            x, y = (
                v.to(device)
                for v in logit_growth.batch(held_out, budget["batch_size"], budget["context"], gen)
            )
            logits = model(x).logits
            losses.append(float(F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))))
    return float(np.mean(losses))


def parts(budget: dict[str, Any]) -> list[str]:
    return [f"seed{s}" for s in budget["seeds"]]


def run_part(part: str, budget: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    return train(budget, int(part.removeprefix("seed")), device)


def trained(full: stored.Stored, part: str = "seed0") -> torch.nn.Module:
    """The stored trained model, in evaluation mode."""
    model = gpt2(full.budget)
    arrays = full.parts[part]
    state = {k[len(PARAM) :]: torch.from_numpy(arrays[k]) for k in arrays if k.startswith(PARAM)}
    model.load_state_dict(state)
    return model.eval()


#: ``part/array`` -> [Tolerance][guide.stored.Tolerance] within which a fingerprint
#: rerun on another arithmetic must reproduce the stored values. Measured with ``python -m
#: guide.stored spread trained_lm`` on an Intel Xeon with AVX-512, 2026-12-05, across
#: six arithmetics (default; MKL_CBWR=COMPATIBLE; ATEN_CPU_CAPABILITY=avx2 and =default; 2 and 3
#: threads) and with every Adam step 1% larger (planted). The attention's query-key-value bias
#: moved most, by up to 3.5e-4 of its norm: the key part's true gradient is zero (a softmax
#: ignores a shift), so Adam follows round-off there; it gets its own tolerance, 0.018 of which
#: the arithmetics used. Every other array moved by at most 5e-7 of its norm, 0.0026 of its
#: tolerance. The planted change moved some array by 65 times its tolerance under every
#: arithmetic.
TOLERANCES: stored.Tolerances = {
    "*c_attn.bias": stored.Tolerance(2e-2, 1e-8),
    "*": stored.Tolerance(2e-4, 1e-8),
}


def agree(full: stored.Stored, live: dict[str, dict[str, np.ndarray]]) -> list[stored.Check]:
    """The rerun's first steps reproduce the stored run's losses within 1%."""
    checks = []
    for part, now in live.items():
        kept = full.parts[part]["loss"]
        for t in (0, len(now["loss"]) // 2, len(now["loss"]) - 1):
            checks.append(
                stored.close(
                    f"{part}: training loss at step {t + 1}",
                    float(kept[t]),
                    float(now["loss"][t]),
                    rtol=0.01,
                )
            )
    return checks


EXPERIMENT = stored.Experiment(
    name="trained_lm",
    parts=parts,
    run_part=run_part,
    full=FULL,
    reduced=REDUCED,
    agree=agree,
    uses=(logit_growth,),
)
