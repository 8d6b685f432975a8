r"""The monitor over training runs whose logits grow: the watching-training page's loop, over seeds.

The page "Watching attention during training" trains the logit-growth page's small language
model at $\eta = 0.1$ with the monitor on (every 10th optimizer step, every query row) and
reports when the monitor warned and when the loss spiked. One such run decides nothing: at this
rate training is chaotic, and a difference in the last bit of one sum (another CPU, another
thread count) moves its events by tens of steps. This study runs the page's loop over 20 seeds
per variant and keeps, per run, the training loss at every step, per head the largest logit and
the entropy at every measured step, and the first step of each finding that grows over a run.
The page's verdicts come from these runs; its build-time run, seed 0, is checked against them.
"""

from __future__ import annotations

import importlib
import math
import pkgutil
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F

import attnscale._monitor
from attnscale import AttentionMonitor, MonitorReport

from .. import stored
from . import logit_growth

FULL: dict[str, Any] = {
    **{k: v for k, v in logit_growth.FULL.items() if k not in ("variants", "halves", "seeds")},
    "variants": ["inverse_sqrt", "qk_layernorm"],
    "seeds": list(range(20)),
    "lr": 0.1,
    "stop_after": 300,  # the first 300 steps of the 2,000-step schedule
    "every": 10,
}
#: The fingerprint's budget: seed 0 of each variant over the first 60 steps, before the run turns
#: chaotic. The page's own build-time runs (seed 0, all 300 steps) are what it checks against
#: the stored seeds.
REDUCED: dict[str, Any] = {**FULL, "seeds": [0], "stop_after": 60}
#: Findings that grow over a run, each stored as the step at which it first appeared.
WATCHED = ("large-logits", "entropy-collapse")


def setup(
    budget: dict[str, Any], strategy: str, seed: int
) -> tuple[
    torch.nn.Module, torch.optim.Optimizer, torch.optim.lr_scheduler.LRScheduler, torch.Generator
]:
    """The model, AdamW, its schedule (linear warmup, cosine decay) and the batch generator of
    one run: the logit-growth study's, at the study's learning rate."""
    torch.manual_seed(seed)
    model = logit_growth.TinyLM(budget, strategy)
    lr = budget["lr"]
    opt = torch.optim.AdamW(
        [
            # weight decay per step, independent of the learning rate
            {
                "params": [p for p in model.parameters() if p.dim() >= 2],
                "weight_decay": budget["weight_decay"] / lr,
            },
            {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=lr,
        betas=(0.9, 0.95),
    )
    warmup, steps = budget["warmup"], budget["steps"]

    def schedule(t: int) -> float:  # multiplier of step t + 1
        if t < warmup:
            return (t + 1) / warmup  # type: ignore[no-any-return]
        return 0.5 * (1 + math.cos(math.pi * (t - warmup) / (steps - warmup)))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
    return model, opt, sched, torch.Generator().manual_seed(seed + 1_000_003)


def train_step(
    budget: dict[str, Any],
    model: torch.nn.Module,
    opt: torch.optim.Optimizer,
    sched: torch.optim.lr_scheduler.LRScheduler | None,
    data: torch.Tensor,
    gen: torch.Generator,
) -> float:
    """One step on a batch of windows: cross-entropy plus the z-loss; returns the cross-entropy."""
    x, y = logit_growth.batch(data, budget["batch_size"], budget["context"], gen)
    logits = model(x)[0].reshape(-1, logit_growth.VOCAB)
    loss = F.cross_entropy(logits, y.reshape(-1))
    z_loss = budget["z_loss"] * torch.logsumexp(logits, -1).square().mean()
    opt.zero_grad(set_to_none=True)
    (loss + z_loss).backward()
    opt.step()
    if sched is not None:
        sched.step()
    return float(loss.detach())


def per_head(logged: list[dict[str, float]], stat: str) -> tuple[list[str], np.ndarray]:
    """The ``site/head`` names, and one per-head statistic as ``(measured steps, heads)``."""
    keys = sorted({k for d in logged for k in d if k.endswith(f"/{stat}") and "/head" in k})
    names = [k.removeprefix("attn/").removesuffix(f"/{stat}") for k in keys]
    return names, np.array([[d.get(k, np.nan) for k in keys] for d in logged], dtype=np.float64)


def train_text() -> torch.Tensor:
    """The training nine tenths of the logit-growth study's corpus."""
    text, _ = logit_growth.corpus()
    return text[: int(0.9 * text.numel())]


def records(
    loss: list[float], logged: list[dict[str, float]], report: MonitorReport
) -> dict[str, np.ndarray]:
    """One run as arrays: its loss per step, what the monitor logged per head at each measured
    step, and the first step of each [WATCHED][] finding (NaN where it never appeared)."""
    first = {f.code: f.first_step for f in report.findings}
    heads, max_logit = per_head(logged, "max_logit")
    return {
        "loss": np.array(loss, dtype=np.float32),
        "steps": np.array([d["attn/step"] for d in logged], dtype=np.float64),
        "heads": np.array(heads),
        "max_logit": max_logit,
        "entropy": per_head(logged, "entropy")[1],
        "warned": np.array([np.nan if s is None else float(s) for s in map(first.get, WATCHED)]),
    }


def run(budget: dict[str, Any], strategy: str, seed: int) -> dict[str, np.ndarray]:
    """One run of the page's loop, the monitor on: its [records][]."""
    text = train_text()
    model, opt, sched, gen = setup(budget, strategy, seed)
    logged: list[dict[str, float]] = []
    n = budget["stop_after"]
    monitor = AttentionMonitor(
        model, all_rows=True, every=budget["every"], optimizer=opt, history=n, log=logged.append
    )
    with monitor:
        loss = [train_step(budget, model, opt, sched, text, gen) for _ in range(n)]
    return records(loss, logged, monitor.report())


def parts(budget: dict[str, Any]) -> list[str]:
    return list(budget["variants"])


def run_part(part: str, budget: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    if device != "cpu":
        raise ValueError(f"device: monitor_training runs on the CPU, got {device!r}")
    return stack([run(budget, part, s) for s in budget["seeds"]], budget["seeds"])


def stack(runs: list[dict[str, np.ndarray]], seeds: list[int]) -> dict[str, np.ndarray]:
    """Runs' [records][] as one part: a leading seed axis on each per-run array."""
    out = {k: np.stack([r[k] for r in runs]) for k in ("loss", "steps", "max_logit", "entropy")}
    return {
        **out,
        "warned": np.stack([r["warned"] for r in runs]),  # (seeds, len(WATCHED))
        "heads": runs[0]["heads"],
        "watched": np.array(WATCHED),
        "seeds": np.array(seeds),
    }


#: ``part/array`` -> [Tolerance][guide.stored.Tolerance] within which a fingerprint
#: rerun on another arithmetic must reproduce the stored values. Measured with ``python -m
#: guide.stored spread monitor_training`` on an Intel Xeon with AVX-512, 2026-12-05,
#: across six arithmetics (default; MKL_CBWR=COMPATIBLE; ATEN_CPU_CAPABILITY=avx2 and =default;
#: 2 and 3 threads) and with every Adam step 1% larger (planted): the largest logit per head
#: moved by up to 1.4e-3 of its norm, the rest by up to 1.3e-4: 0.14 of the tolerances below at
#: most; the planted change moved the entropy by 136 times its tolerance.
TOLERANCES: stored.Tolerances = {
    "*/max_logit": stored.Tolerance(1e-2, 1e-8),
    "*": stored.Tolerance(1e-3, 1e-8),
}


def first_warning(warned: np.ndarray) -> np.ndarray:
    """Per run (all axes but the last), the first step of any watched finding; NaN where none
    appeared."""
    hit = np.isfinite(warned).any(axis=-1)
    return np.where(hit, np.nanmin(np.where(hit[..., None], warned, 0.0), axis=-1), np.nan)


def agree(full: stored.Stored, live: dict[str, dict[str, np.ndarray]]) -> list[stored.Check]:
    """A rerun of seed 0 against the stored seeds: its loss before the run turns chaotic (steps
    1, 25 and 50, within 1% of the stored seed 0) and, for a rerun of all the steps, its first
    warning within the stored seeds' range widened by their interquartile range on each side
    (at this rate a rerun on another arithmetic is one more draw from the seeds' spread)."""
    checks = []
    for part, now in live.items():
        kept = full.parts[part]
        i = list(kept["seeds"]).index(int(now["seeds"][0]))
        for t in (0, 24, 49):
            checks.append(
                stored.close(
                    f"{part}, seed {int(now['seeds'][0])}: training loss at step {t + 1}",
                    float(kept["loss"][i, t]),
                    float(now["loss"][0, t]),
                    rtol=0.01,
                )
            )
        if now["loss"].shape[1] < kept["loss"].shape[1]:
            continue  # the first warning needs the whole run
        first = first_warning(kept["warned"])
        warned = first[np.isfinite(first)]
        this = float(first_warning(now["warned"])[0])
        if warned.size:
            q1, q3 = np.percentile(warned, [25, 75])
            low, high = warned.min() - (q3 - q1), warned.max() + (q3 - q1)
            bound = f"within {low:.0f} to {high:.0f} (the seeds' range ± their IQR)"
            ok = low <= this <= high if math.isfinite(this) else warned.size < first.size
            seen = f"{warned.min():.0f} to {warned.max():.0f} in {warned.size} of {first.size}"
        else:
            bound, ok, seen = "never, as every stored seed", not math.isfinite(this), "never"
        checks.append(
            stored.Check(
                f"{part}, seed 0: first warning (step)",
                seen,
                f"{this:.0f}" if math.isfinite(this) else "-",  # a dash: never warned
                bound,
                ok,
            )
        )
    return checks


EXPERIMENT = stored.Experiment(
    name="monitor_training",
    parts=parts,
    run_part=run_part,
    full=FULL,
    reduced=REDUCED,
    agree=agree,
    uses=(
        logit_growth,
        *(
            importlib.import_module(f"attnscale._monitor.{m.name}")
            for m in pkgutil.iter_modules(attnscale._monitor.__path__)
        ),
        attnscale._monitor,
    ),
)
