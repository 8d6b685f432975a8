"""Doctest namespace: docstring examples may use torch and any public attnscale name."""

import pytest
import torch

import attnscale


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict[str, object]) -> None:
    doctest_namespace["torch"] = torch
    doctest_namespace.update({name: getattr(attnscale, name) for name in attnscale.__all__})
