"""The fixes that ``guide.studies.logit_fixes`` trains do what their papers say, on its model."""

from __future__ import annotations

import math

import pytest
import torch

from guide.studies import logit_fixes, logit_growth

BUDGET = {**logit_fixes.FULL, "d_model": 32, "heads": 2, "layers": 1, "context": 16}


def _model(seed: int = 0) -> logit_growth.TinyLM:
    torch.manual_seed(seed)
    return logit_growth.TinyLM(BUDGET, "inverse_sqrt")


def _tokens(seed: int = 1) -> torch.Tensor:
    return torch.randint(
        0, logit_growth.VOCAB, (4, 16), generator=torch.Generator().manual_seed(seed)
    )


def test_qk_clip_bounds_each_heads_logits_on_the_same_batch() -> None:
    """After the clip, the batch that passed tau gives at most tau in every head, the heads
    below tau keep their weights, and every factor is sqrt(tau / S_max) on q and k alike."""
    model = _model()
    with torch.no_grad():
        for block in model.blocks:  # large logits in head 0 of each block only
            block.attn.q_proj.weight[: block.attn.head_dim] *= 40
        x = _tokens()
        _, before, _ = model(x, watch=True)
        kept = [b.attn.q_proj.weight[b.attn.head_dim :].clone() for b in model.blocks]
        tau = float(min(h[0] for h in before)) / 2  # every head 0 passes it, head 1 does not
        assert all(float(h[1]) < tau for h in before)
        logit_fixes.qk_clip(tau)(model, before)
        _, after, _ = model(x, watch=True)
    for h_before, h_after, block, rest in zip(before, after, model.blocks, kept, strict=True):
        assert float(h_after[0]) == pytest.approx(tau, rel=1e-4)
        assert float(h_after[1]) == pytest.approx(float(h_before[1]), rel=1e-5)
        assert torch.equal(block.attn.q_proj.weight[block.attn.head_dim :], rest)


def test_qk_clip_leaves_a_head_with_negative_logits_alone() -> None:
    """A head whose largest logit is negative is far below tau (its factor would be negative,
    and its square root NaN)."""
    model = _model()
    weights = [b.attn.q_proj.weight.clone() for b in model.blocks]
    peaks = [torch.tensor([-5.0, 3.0]) for _ in model.blocks]
    with torch.no_grad():
        logit_fixes.qk_clip(1.0)(model, peaks)
    for block, w in zip(model.blocks, weights, strict=True):
        assert torch.isfinite(block.attn.q_proj.weight).all()
        assert torch.equal(block.attn.q_proj.weight[:16], w[:16])  # head 0: -5, left alone
        scaled = block.attn.q_proj.weight[16:] / w[16:]
        assert torch.allclose(scaled, torch.full_like(scaled, math.sqrt(1 / 3)))


def test_sigma_reparam_weights_have_the_learned_gain_as_spectral_norm() -> None:
    """gamma W / sigma(W): the effective weight's largest singular value is gamma (1 at first),
    for every linear layer, within 1% after 30 steps of one power iteration each."""
    model = _model()
    logit_fixes.sigma_reparam(model)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 1 + 6 * BUDGET["layers"]  # the head; q, k, v, out and the MLP's two
    for _ in range(30):  # training-mode forwards run one power iteration each
        model(_tokens())
    with torch.no_grad():
        for m in linears:
            m.parametrizations.weight[1].gamma.fill_(0.5)
            assert float(torch.linalg.matrix_norm(m.weight, ord=2)) == pytest.approx(0.5, rel=1e-2)


def test_muon_takes_the_blocks_matrices_and_adamw_the_rest() -> None:
    model = _model()
    muon, adamw = logit_fixes.muon(model, 1e-2, BUDGET)
    assert isinstance(muon, torch.optim.Muon) and isinstance(adamw, torch.optim.AdamW)
    in_muon = {id(p) for g in muon.param_groups for p in g["params"]}
    in_adamw = {id(p) for g in adamw.param_groups for p in g["params"]}
    assert in_muon == {id(p) for p in model.blocks.parameters() if p.dim() == 2}
    assert in_muon | in_adamw == {id(p) for p in model.parameters()} and not in_muon & in_adamw
    assert muon.param_groups[0]["weight_decay"] == pytest.approx(BUDGET["weight_decay"] / 1e-2)


def test_the_recipe_names_its_variants() -> None:
    budget, keywords = logit_fixes.recipe("no_z_loss", BUDGET)
    assert budget["z_loss"] == 0.0 and keywords == {} and BUDGET["z_loss"] > 0
    assert logit_fixes.recipe("softcap", BUDGET)[1] == {"softcap": 50.0}
    with pytest.raises(ValueError, match=r"variant must be one of .*muon_qk_clip, got 'mup'"):
        logit_fixes.recipe("mup", BUDGET)
    assert logit_fixes.FULL["variants"] == list(
        dict.fromkeys(p.rsplit("_lr", 1)[0] for p in logit_growth.parts(logit_fixes.FULL))
    )
