"""Forward+backward time of each score-scaling strategy relative to 1/sqrt(d_k).

All strategies run round-robin in one process on one fixed shape, so they share the machine's
load; the table reports the median time per call and its ratio to ``inverse_sqrt``. Rows that do
identical work (``none``, ``inverse_sqrt``, ``inverse_d``) show the timing noise. Two extra rows
separate the cost of the explicit (weights-returning) path from the strategy itself.

Run: ``python benchmarks/bench_scaling.py``.
"""

from __future__ import annotations

import time

import torch

import attnscale

SEED = 0
BATCH, SEQ_LEN, D_MODEL, NUM_HEADS = 4, 128, 256, 4  # d_k = 64
WARMUP, REPEATS = 3, 15

torch.manual_seed(SEED)
x = torch.randn(BATCH, SEQ_LEN, D_MODEL)
cases: dict[str, tuple[attnscale.MultiHeadAttention, bool]] = {}
for name in attnscale.SCALING_STRATEGIES:
    torch.manual_seed(SEED)
    cases[name] = (attnscale.MultiHeadAttention(D_MODEL, NUM_HEADS, strategy=name), False)
torch.manual_seed(SEED)
cases["softcap_50 (on inverse_sqrt)"] = (
    attnscale.MultiHeadAttention(D_MODEL, NUM_HEADS, softcap=50.0),
    False,
)
cases["inverse_sqrt, need_weights=True"] = (cases["inverse_sqrt"][0], True)

times: dict[str, list[float]] = {label: [] for label in cases}
for rep in range(WARMUP + REPEATS):
    for label, (mha, need_weights) in cases.items():
        mha.zero_grad(set_to_none=True)
        start = time.perf_counter()
        mha(x, is_causal=True, need_weights=need_weights).output.sum().backward()
        if rep >= WARMUP:
            times[label].append(time.perf_counter() - start)

median = {label: sorted(t)[len(t) // 2] for label, t in times.items()}
base = median["inverse_sqrt"]
print(
    f"forward+backward, batch {BATCH}, length {SEQ_LEN}, d_model {D_MODEL}, {NUM_HEADS} heads "
    f"(d_k {D_MODEL // NUM_HEADS}), causal, {torch.get_num_threads()} threads, "
    f"median of {REPEATS}"
)
print(f"| {'strategy':<32} | {'median ms':>9} | {'vs inverse_sqrt':>15} |")
print(f"|{'-' * 34}|{'-' * 11}|{'-' * 17}|")
for label, t in median.items():
    print(f"| {label:<32} | {1e3 * t:9.2f} | {t / base:15.2f} |")
