"""Fixtures shared by the test files."""

from __future__ import annotations

import pytest
from bad_input import TINY_TRAIN

import attnscale as asc


@pytest.fixture(scope="module")
def small_result() -> asc.TrainingResult:
    return asc.train("mean", strategies=["none", "cosine"], **TINY_TRAIN)
