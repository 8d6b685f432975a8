"""The monitor on a trained model: healthy sharp heads get no warning, planted bugs are caught."""

from __future__ import annotations

import pytest
import torch

from guide import calibration


@pytest.fixture(scope="module")
def runs() -> calibration.Calibration:
    return calibration.run(4)


def test_a_healthy_trained_model_gets_no_warning(runs: calibration.Calibration) -> None:
    assert runs.healthy_warnings == [], runs.healthy_report
    # the model is trained: its heads are sharper than at initialisation
    assert runs.trained_entropy < runs.initial_entropy


@pytest.mark.parametrize("bug", list(calibration.PLANTED))
def test_bugs_planted_in_the_trained_model_are_caught(
    runs: calibration.Calibration, bug: str
) -> None:
    assert "scale-mismatch" in runs.planted[bug], runs.planted[bug]


def test_planting_restores_the_model() -> None:
    model = calibration.model()
    before = [a.scaling for a in calibration.attentions(model)]
    with calibration.planted(model, "no scale"):
        assert all(a.scaling == 1.0 for a in calibration.attentions(model))
    assert [a.scaling for a in calibration.attentions(model)] == before
    x = calibration.batches(1)[0]
    with torch.no_grad():
        assert torch.isfinite(model(x).logits).all()
