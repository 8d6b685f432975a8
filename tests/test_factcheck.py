"""The fact-check page prints these verdicts; this test fails if a measurement changes one."""

from pathlib import Path

import numpy as np
import pytest
import torch

from attnscale._docs import factcheck
from attnscale._docs.factcheck import PAGE_TITLES, VERDICTS, check_claims

ROOT = Path(__file__).parents[1]

# What the site says about each claim of the source article.
EXPECTED = {
    "1.1": "holds",
    "1.2": "holds",
    "2.1": "false",
    "2.2": "holds only partly",
    "3.2": "holds only partly",
    "4.2a": "holds, negligible",
    "4.2b": "holds, negligible",
    "4.2c": "false",
    "5.1": "holds only partly",
    "5.3": "false",
}


@pytest.fixture(scope="module")
def checks():
    return {c.section: c for c in check_claims(seed=0)}


def test_every_claim_is_checked(checks):
    assert list(checks) == list(EXPECTED)


@pytest.mark.parametrize("section", EXPECTED)
def test_verdict(checks, section):
    check = checks[section]
    assert check.verdict in VERDICTS
    assert check.verdict == EXPECTED[section], check.evidence


@pytest.mark.parametrize("seed", [1, 2])
def test_verdicts_do_not_hinge_on_the_seed(seed):
    verdicts = {c.section: c.verdict for c in check_claims(seed=seed)}
    assert verdicts == EXPECTED


def test_seed_validation():
    with pytest.raises(ValueError, match="seed"):
        check_claims(seed=-1)


def test_links_name_the_page_they_link(checks):
    """Each guide page a claim links to has its title as the link text, read from its source."""
    for path, title in PAGE_TITLES.items():
        parts = path.strip("/").split("/")  # generated, gallery, section[, script]
        source = ROOT / "examples" / Path(*parts[2:])
        text = (source.with_suffix(".py") if len(parts) == 4 else source / "README.md").read_text()
        lines = (line.removeprefix('r"""') for line in text.splitlines())
        heading = next(line for line in lines if line.startswith("# "))
        assert heading[2:] == title, path
    assert {c.page for c in checks.values()} <= set(PAGE_TITLES)


# -- bad input: a clear error naming the argument, or the right answer (helpers in bad_input.py) --


def test_check_claims_leaves_the_global_rng_alone(monkeypatch) -> None:
    # The cheap checks; 5.3 builds nn layers, which draw from the global generator.
    cheap = [c for c in factcheck._CHECKS if c.__name__ in ("_check_2_1", "_check_5_3")]
    assert len(cheap) == 2
    monkeypatch.setattr(factcheck, "_CHECKS", tuple(cheap))
    torch.manual_seed(123)
    before = torch.get_rng_state()
    first = factcheck.check_claims(seed=np.int64(4))
    assert torch.equal(torch.get_rng_state(), before)
    second = factcheck.check_claims(seed=4)
    assert [c.numbers for c in first] == [c.numbers for c in second]
