r"""Each variant of the two training sweeps at its chosen learning rate, on ten fresh seeds.

The sweeps of ``scaling_matters`` and ``strategy_grid`` pick each variant's best learning rate
and compare the variants on the same five seeds. That selection favours the variant whose runs
vary more from seed to seed (the minimum of noisier values is pulled further down: the winner's
curse), and five seeds leave some verdicts undecided. Here each variant is trained again at the
best grid point the pages' declared metric (``guide.metric``) picks on the stored
sweep, with the sweep's own settings, on ten seeds the sweeps never used; the pages compare the
variants on these. A seed fixes the data, the batch order and the initial weights, shared by
every variant of a part, so the comparison stays paired.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import intervals, metric, stored
from . import TRAINING_CODE, _sweep, scaling_matters, strategy_grid

FULL: dict[str, Any] = {
    "parts": [
        *(f"scaling_matters/{p}" for p in scaling_matters.parts(scaling_matters.FULL)),
        *(f"strategy_grid/{task}" for task in strategy_grid.FULL["tasks"]),
    ],
    "seeds": list(range(5, 15)),
}
#: The build's rerun: one part, its first fresh seed.
REDUCED: dict[str, Any] = {"parts": ["scaling_matters/mean_d16"], "seeds": [5]}


def parts(budget: dict[str, Any]) -> list[str]:
    return [p.replace("/", "__") for p in budget["parts"]]


def chosen(source: str, part: str) -> dict[str, int]:
    """Each variant's best grid point on the stored sweep, as a quarter-decade exponent."""
    arrays = stored.load(source).parts[part]
    values, log_lrs, names = metric.sweep_metric(arrays)
    return {
        n: int(arrays["quarters"][intervals.best(values[i], log_lrs).point])
        for i, n in enumerate(names)
    }


def run_part(part: str, budget: dict[str, Any], device: str) -> dict[str, np.ndarray]:
    source, name = part.split("__")
    if source == "scaling_matters":
        task, d = name.rsplit("_d", 1)
        d_k, settings = int(d), scaling_matters.FULL
        labels = scaling_matters.variants(settings["variants"], d_k)
    else:
        task, settings = name, strategy_grid.FULL
        d_k, labels = settings["d_k"], {n: (n, 1.0) for n in settings["strategies"]}
    quarters = chosen(source, name)
    runs = [
        _sweep.sweep_budget(
            task,
            {label: variant},
            d_k,
            {**settings, "quarters": [quarters[label]], "seeds": budget["seeds"], "extend": False},
            device,
        )
        for label, variant in labels.items()
    ]
    keys = [k for k in runs[0] if k not in ("quarters", "variants", "seeds")]
    return {
        "variants": np.array(list(labels)),
        "quarters": np.array([quarters[label] for label in labels]),
        "seeds": np.array(budget["seeds"]),
        **{k: np.concatenate([r[k][:, 0] for r in runs]) for k in keys},  # (variants, seeds, ...)
    }


def agree(full: stored.Stored, live: dict[str, dict[str, np.ndarray]]) -> list[stored.Check]:
    """The rerun's models against the same stored ones: the chosen learning rates exactly, the
    metric within 0.05 and the logit spread at the first step within 0.1%."""
    checks = []
    for part, now in live.items():
        kept = full.parts[part]
        initial = metric.initial_loss(kept["curve_loss"])
        cols = [list(kept["seeds"]).index(s) for s in now["seeds"]]
        for i, label in enumerate(now["variants"]):
            checks.append(
                stored.close(
                    f"{part}, {label}: chosen rate (quarter-decade exponent)",
                    float(kept["quarters"][i]),
                    float(now["quarters"][i]),
                    rtol=0.0,
                )
            )
            for c, s in zip(cols, now["seeds"], strict=True):
                where = f"{part}, {label}, seed {int(s)}"
                checks.append(
                    stored.close(
                        f"{where}: metric",
                        float(metric.metric(kept["curve_loss"][i, c], initial)),
                        float(
                            metric.metric(
                                now["curve_loss"][i, list(now["seeds"]).index(s)], initial
                            )
                        ),
                        rtol=0.0,
                        atol=0.05,
                    )
                )
                checks.append(
                    stored.close(
                        f"{where}: logit spread at step 1",
                        float(kept["logit_std0"][i, c]),
                        float(now["logit_std0"][i, list(now["seeds"]).index(s)]),
                        rtol=1e-3,
                    )
                )
    return checks


#: ``part/array`` -> [Tolerance][guide.stored.Tolerance] for a fingerprint rerun on
#: another arithmetic: the sweeps' own (the same models and settings). Measured with ``python -m
#: guide.stored spread fresh_seeds`` on an Intel Xeon with AVX-512, 2026-12-05: the
#: worst plain arithmetic moved 0.033 of the tolerance (a gradient-norm curve under
#: MKL_CBWR=COMPATIBLE), the planted change (every Adam step 1% larger) 12 times it.
TOLERANCES: stored.Tolerances = {
    "*/curve_*": stored.Tolerance(5e-3, 1e-8, first=16),
    "*/train_loss": stored.Tolerance(0.0, first=0),
    "*/test_loss": stored.Tolerance(0.0, first=0),
    "*": stored.Tolerance(1e-4, 1e-8),
}


EXPERIMENT = stored.Experiment(
    name="fresh_seeds",
    parts=parts,
    run_part=run_part,
    full=FULL,
    reduced=REDUCED,
    agree=agree,
    uses=(_sweep, metric, intervals, scaling_matters, strategy_grid, *TRAINING_CODE),
)
