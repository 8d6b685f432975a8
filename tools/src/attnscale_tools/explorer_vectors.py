"""Test vectors for the explorer's JavaScript (docs/assets/explorer.js), written by the library.

``python -m attnscale_tools.explorer_vectors`` (run by ``nox -s docs``) writes ``build/explorer/vectors.json``:
rows of logits with what ``attnscale`` computes for each (softmax, entropy, largest probability,
Jacobian norm), sets of rows with their saturated fraction, and settings of the sliders with the
spread of the softmax input. The browser test (tests/site/test_explorer.py) runs the page's
functions on the same inputs and compares within 1e-6.
"""

from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any

import torch

import attnscale
from attnscale_tools import ROOT

OUT = ROOT / "build" / "explorer" / "vectors.json"


def _rows() -> list[torch.Tensor]:
    """Rows that reach every branch: uniform, ties, nearly one-hot, large n, large spreads."""
    gen = torch.Generator().manual_seed(0)
    rows = [
        torch.zeros(8),
        torch.tensor([0.0, -80.0]),  # p_2 squared underflows: the accurate Jacobian form
        torch.tensor([3.0, 3.0, -1.0, 0.5]),  # a tie for the largest entry
        torch.tensor([1000.0, 0.0, -1000.0]),
    ]
    for n in (8, 256, 4096):
        for sigma in (0.1, 1.0, 10.0, 100.0):
            rows.append(sigma * torch.randn(n, generator=gen, dtype=torch.float64))
    return [r.double() for r in rows]


def vectors() -> dict[str, Any]:
    rows = []
    for z in _rows():
        rows.append(
            {
                "logits": z.tolist(),
                "softmax": attnscale.tempered_softmax(z).tolist(),
                "entropy": float(attnscale.softmax_entropy(z)),
                "normalized_entropy": float(attnscale.softmax_entropy(z, normalized=True)),
                "max_probability": float(attnscale.max_probability(z)),
                "jacobian_norm": float(attnscale.softmax_jacobian_norm(z)),
            }
        )
    gen = torch.Generator().manual_seed(1)
    saturated = []
    for sigma in (1.0, 5.0, 20.0):
        batch = sigma * torch.randn(64, 32, generator=gen, dtype=torch.float64)
        saturated.append({"rows": batch.tolist(), "fraction": attnscale.saturated_fraction(batch)})
    spreads = []
    for d_k, variance, scaled, temperature in itertools.product(
        (16, 64, 1024, 4096), (0.25, 1.0, 4.0), (True, False), (0.25, 1.0, 4.0)
    ):
        scale = (1 / math.sqrt(d_k) if scaled else 1.0) / temperature
        moments = attnscale.scaled_dot_product_moments(
            d_k, scale=scale, var_q=variance, var_k=variance
        )
        spreads.append(
            {
                "d_k": d_k,
                "variance": variance,
                "scaled": scaled,
                "temperature": temperature,
                "std": math.sqrt(moments.variance),
            }
        )
    return {
        "attnscale": attnscale.__version__,
        "rows": rows,
        "saturated": saturated,
        "spreads": spreads,
    }


def main(out: Path = OUT) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(vectors()))
    print(f"explorer test vectors: {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else OUT)
