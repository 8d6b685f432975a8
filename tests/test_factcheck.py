"""The fact-check page prints these verdicts; this test fails if a measurement changes one."""

from pathlib import Path

import numpy as np
import pytest
import torch

from guide import factcheck
from guide.factcheck import PAGE_TITLES, VERDICTS, check_claims

ROOT = Path(__file__).parents[1]

# What the site says about each claim of the source article.
EXPECTED = {
    "1.1": "holds",
    "1.2": "holds",
    "2.1": "false",
    "2.2": "holds only partly",
    "3.2a": "false",
    "3.2b": "holds only partly",
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


def test_stability_rule_can_return_every_verdict():
    """3.2b's rule on planted entropies: collapsed at init, only under growth, never."""
    rule = factcheck._stability_verdict
    assert rule({"sqrt_g1": 0.2, "sqrt_g10": 0.01, "qknorm_g10": 0.9}) == "false"
    assert rule({"sqrt_g1": 0.9, "sqrt_g10": 0.01, "qknorm_g10": 0.9}) == "holds only partly"
    assert rule({"sqrt_g1": 0.9, "sqrt_g10": 0.8, "qknorm_g10": 0.9}) == "holds"


def test_saturation_rule_reads_quantiles_at_large_sigma(checks):
    """2.2's rule on planted quantiles; the mean plays no part."""
    rule = factcheck._saturation_verdict
    base = {"median_sigma_1": 0.2, "mean_sigma_32": 0.5}
    assert rule(base | {"median_sigma_32": 1e-4, "p90_sigma_32": 1e-3}) == "holds"
    assert rule(base | {"median_sigma_32": 1e-4, "p90_sigma_32": 0.3}) == "holds only partly"
    assert rule(base | {"median_sigma_32": 0.1, "p90_sigma_32": 0.3}) == "false"
    nums = checks["2.2"].numbers
    assert nums["median_sigma_32"] < factcheck.TINY * nums["median_sigma_1"] < nums["p90_sigma_32"]


def test_table_completeness_is_decided_from_the_lists(checks):
    """3.2a: every fix the site examines is on the page named for it; the article's table lacks
    exactly the four that act on the logits."""
    for name, (page, term) in factcheck.SITE_FIXES.items():
        source = ROOT / "examples" / f"{page.rstrip('/')}.py"
        assert term in source.read_text(), (name, source)
    assert set(factcheck.ARTICLE_TABLE) <= set(factcheck.SITE_FIXES)
    missing = set(factcheck.SITE_FIXES) - set(factcheck.ARTICLE_TABLE)
    assert missing == {"QK-norm", "σReparam", "soft-capping", "QK-Clip"}
    assert checks["3.2a"].numbers["missing"] == len(missing)


def test_exact_tail_fraction_and_kurtosis(checks):
    """1.1's reference values: the exact fraction for Gaussian coordinates agrees with a direct
    simulation at a small d_k, where it differs from the normal approximation; at d_k = 1024
    the measured excess kurtosis is consistent with 6/d_k."""
    gen = torch.Generator().manual_seed(0)
    d_k, n = 4, 400_000
    s = (torch.randn(n, d_k, generator=gen, dtype=torch.float64) ** 2).sum(-1)  # |q|^2
    s = s.sqrt() * torch.randn(n, generator=gen, dtype=torch.float64)  # q . k in law
    exact = factcheck._fraction_inside_gaussian(d_k, 3 * 2.0)
    measured = (s.abs() <= 6).double().mean().item()
    assert abs(measured - exact) < 4 * (exact * (1 - exact) / n) ** 0.5
    assert exact < 0.9973 - 0.005  # heavier tails than the normal approximation's 99.73%
    nums = checks["1.1"].numbers
    assert nums["excess_kurtosis_theory"] == 6 / 1024
    assert abs(nums["excess_kurtosis"] - 6 / 1024) < nums["excess_kurtosis_half"]
    assert abs(nums["scaled_exact"] - nums["scaled_theory"]) < 1e-3


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
