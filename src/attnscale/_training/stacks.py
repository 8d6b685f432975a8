"""Models trained together: parameters stacked along a leading model dimension, one step for all.

A [VmapStack][] runs any model with ``torch.func.vmap`` over ``torch.func.functional_call``; a
[SimpleStack][] runs single-head models whose strategy only multiplies the logits by a constant,
with the batched matrix products written out.
"""

from __future__ import annotations

import copy
import math
from collections.abc import Callable

import torch
from torch import nn
from torch.func import functional_call, stack_module_state, vmap

from .._models import SimpleAttentionModel
from .._strategies import ScoreScaling
from .config import TrainingConfig
from .result import METRICS

__all__ = ["SimpleStack", "Stack", "VmapStack", "bilinear_is_cheaper", "param_group"]


class Probe(nn.Module):
    """Runs a model with weights and logits, and reports its strategy's current multiplier."""

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(
        self, x: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        res = self.model(x, need_weights=True, need_logits=True)
        strategy = self.model.strategy
        assert isinstance(strategy, ScoreScaling)  # both models expose their strategy
        scale = strategy.effective_scale().to(x.device).mean()
        return res.output, res.weights, res.logits, scale


def param_group(name: str) -> str:
    leaf = name.rsplit(".", 2)
    owner = leaf[-2] if len(leaf) >= 2 else ""
    return {"q_proj": "q", "k_proj": "k"}.get(owner, "other")


class Stack:
    """Models trained together, their parameters stacked along a leading model dimension.

    Subclasses provide ``forward``: per-model losses and attention statistics of a stacked batch.
    This class owns the step: one backward pass over the summed losses, gradient norms per
    parameter group, and Adam applied element-wise with a learning rate per model.
    """

    def __init__(
        self,
        params: dict[str, torch.Tensor],
        lrs: torch.Tensor,
        seed_pos: torch.Tensor,
        config: TrainingConfig,
    ) -> None:
        self.params = {k: v.detach().clone().requires_grad_() for k, v in params.items()}
        self.lrs = lrs  # (models,)
        lr_values = set(lrs.tolist())
        self.shared_lr = lr_values.pop() if len(lr_values) == 1 else None
        self.seed_pos = seed_pos  # (models,): which seed's data each model sees
        self.betas, self.eps = config.betas, config.eps
        self.weight_decay, self.warmup_steps = config.weight_decay, config.warmup_steps
        self.exp_avg = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.exp_avg_sq = {k: torch.zeros_like(v) for k, v in self.params.items()}
        self.groups = {k: param_group(k) for k in self.params}

    def forward(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """``(loss (models,), weights, logits (models, batch, heads, L, L), scale (models,))``."""
        raise NotImplementedError

    def states(self) -> list[dict[str, torch.Tensor]]:
        """Each model's ``state_dict``, on the CPU."""
        raise NotImplementedError

    def step(self, t: int, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """One Adam step on ``x``/``y`` ``(models, batch, length, d_model)``.

        Returns the step's metrics as ``(len(METRICS), models)``, in the order of METRICS.
        """
        loss, w, logits, scale = self.forward(x, y)
        # One backward pass for the weights and the softmax input: the sum over models leaves
        # each model's gradients those of its own loss.
        params = list(self.params.values())
        *grads, logit_grad = torch.autograd.grad(loss.sum(), [*params, logits], allow_unused=True)
        with torch.no_grad():
            sq = {name: torch.zeros_like(loss) for name in ("q", "k", "other")}
            for (k, p), g in zip(self.params.items(), grads, strict=True):
                p.grad = g
                if g is not None:
                    sq[self.groups[k]] += g.flatten(1).square().sum(1)
            metrics = {
                "loss": loss.detach(),
                "grad_norm": (sq["q"] + sq["k"] + sq["other"]).sqrt(),
                "grad_norm_q": sq["q"].sqrt(),
                "grad_norm_k": sq["k"].sqrt(),
                "grad_norm_other": sq["other"].sqrt(),
                **_logit_grad_stats(logit_grad),
                **_attention_stats(w, logits),
                "scale": scale.detach().expand_as(loss),
            }
            self._adam(t)
        return torch.stack([metrics[m] for m in METRICS])

    def _adam(self, t: int) -> None:
        # torch.optim.AdamW's update (not amsgrad; weight_decay=0 is torch.optim.Adam's),
        # element-wise on the stacked tensors with a learning rate per model, so every model
        # keeps its own state. Warmup scales the learning rate linearly up to step warmup_steps.
        beta1, beta2 = self.betas
        bias1 = 1 - beta1**t
        bias2_sqrt = math.sqrt(1 - beta2**t)
        warm = min(1.0, t / self.warmup_steps) if self.warmup_steps else 1.0
        for k, p in self.params.items():
            if p.grad is None:
                continue
            g = p.grad
            m, v = self.exp_avg[k], self.exp_avg_sq[k]
            m.lerp_(g, 1 - beta1)
            v.mul_(beta2).addcmul_(g, g, value=1 - beta2)
            denom = (v.sqrt() / bias2_sqrt).add_(self.eps)
            if self.shared_lr is not None:
                lr = warm * self.shared_lr
                if self.weight_decay:
                    p.mul_(1 - lr * self.weight_decay)
                p.addcdiv_(m, denom, value=-lr / bias1)
            else:
                lrs = warm * self.lrs.view(-1, *([1] * (p.dim() - 1)))  # (models, 1, ...)
                if self.weight_decay:
                    p.mul_(1 - lrs * self.weight_decay)
                p.sub_(lrs / bias1 * m / denom)

    def evaluate(self, x: torch.Tensor, y: torch.Tensor, chunk: int = 256) -> torch.Tensor:
        """Mean loss per model over each model's seed's data ``x``/``y`` ``(seeds, samples, ...)``."""
        total = torch.zeros(self.seed_pos.shape[0], device=x.device)
        n = x.shape[1]
        with torch.no_grad():
            for start in range(0, n, chunk):
                xb = x[:, start : start + chunk].index_select(0, self.seed_pos)
                yb = y[:, start : start + chunk].index_select(0, self.seed_pos)
                loss = self.forward(xb, yb)[0]  # (models,)
                total += loss * xb.shape[1]
        return total / n


class VmapStack(Stack):
    """Any model, run with ``torch.func.vmap`` over ``functional_call``."""

    def __init__(
        self,
        models: list[nn.Module],
        lrs: torch.Tensor,
        seed_pos: torch.Tensor,
        config: TrainingConfig,
    ) -> None:
        probes = [Probe(m) for m in models]
        params, self.buffers = stack_module_state(probes)
        super().__init__(params, lrs, seed_pos, config)
        base = copy.deepcopy(probes[0]).to("meta")

        def one(
            p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor
        ) -> tuple[torch.Tensor, ...]:
            out, w, logits, scale = functional_call(base, (p, b), (x,))
            loss = ((out - y) ** 2).mean()
            return loss, w, logits, scale

        self._vmapped: Callable[..., tuple[torch.Tensor, ...]] = vmap(one)

    def forward(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        loss, w, logits, scale = self._vmapped(self.params, self.buffers, x, y)
        return loss, w, logits, scale

    def states(self) -> list[dict[str, torch.Tensor]]:
        prefix = "model."
        out = []
        for i in range(self.lrs.shape[0]):
            state = {k[len(prefix) :]: v[i].detach().cpu().clone() for k, v in self.params.items()}
            state.update({k[len(prefix) :]: v[i].cpu().clone() for k, v in self.buffers.items()})
            out.append(state)
        return out


_SIMPLE_WEIGHTS = ("q_proj.weight", "k_proj.weight", "v_proj.weight", "out_proj.weight")


def bilinear_is_cheaper(d_model: int, d_k: int, tokens: int) -> bool:
    """Whether logits through alpha W_q^T W_k, d_model^2 (d_k + tokens) multiply-adds per model,
    cost less than through the queries and keys, 2 tokens d_model d_k."""
    return d_model * (d_k + tokens) < 2 * tokens * d_k


class SimpleStack(Stack):
    """SimpleAttentionModels whose logits are a constant times q . k (``strategy.constant_scale``).

    The constant may differ from model to model, so models of several such strategies share one
    stack. The computation is the module's, written with batched matrix products over the model
    dimension: these small models spend much of a step in per-operation overhead, which this
    path cuts. When it needs fewer operations, for heads wider than about $d_{\text{model}}/2$,
    the logits are computed through the $d_{\text{model}} \times d_{\text{model}}$ matrix
    $\alpha W_q^\top W_k$ instead of the queries and keys.
    """

    def __init__(
        self,
        models: list[SimpleAttentionModel],
        lrs: torch.Tensor,
        seed_pos: torch.Tensor,
        config: TrainingConfig,
    ) -> None:
        states = [m.state_dict() for m in models]
        params = {k: torch.stack([st[k] for st in states]) for k in _SIMPLE_WEIGHTS}
        super().__init__(params, lrs, seed_pos, config)
        self.d_k, self.d_v = models[0].d_k, models[0].d_v
        alphas = [m.strategy.effective_scale().mean() for m in models]
        self.scale = torch.stack(alphas).to(lrs.device)  # (models,)

    @staticmethod
    def supports(model: nn.Module) -> bool:
        return type(model) is SimpleAttentionModel and model.strategy.constant_scale

    def forward(
        self, x: torch.Tensor, y: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        models, batch, length, d_model = x.shape
        w_q, w_k, w_v, w_o = (self.params[k] for k in _SIMPLE_WEIGHTS)
        tokens = x.reshape(models, batch * length, d_model)
        if bilinear_is_cheaper(d_model, self.d_k, batch * length):
            # q . k = x_i W_q^T W_k x_j^T, through the (d_model, d_model) matrix alpha W_q^T W_k.
            bilinear = (w_q.transpose(1, 2) * self.scale.view(-1, 1, 1)) @ w_k  # (models, d, d)
            xm = torch.bmm(tokens, bilinear).view(models, batch, length, d_model)
            logits = xm @ x.transpose(-2, -1)  # (models, batch, L, L)
            v = torch.bmm(tokens, w_v.transpose(1, 2)).view(models, batch, length, self.d_v)
        else:
            # One product for queries, keys and values: (models, batch * length, 2 d_k + d_v).
            w_qkv = torch.cat([w_q, w_k, w_v], dim=1)  # (models, 2 d_k + d_v, d_model)
            qkv = torch.bmm(tokens, w_qkv.transpose(1, 2))
            q, k, v = torch.split(
                qkv.view(models, batch, length, -1), [self.d_k, self.d_k, self.d_v], dim=-1
            )  # (models, batch, length, d)
            # The multiplier on the query before the product, as the library's attention does.
            logits = (q * self.scale.view(-1, 1, 1, 1)) @ k.transpose(
                -2, -1
            )  # (models, batch, L, L)
        # The heads dimension (1) is added before the softmax, so that the logits returned are
        # the tensor the loss depends on (the trainer takes the loss's gradient with respect
        # to them).
        logits = logits.unsqueeze(2)  # (models, batch, 1, L, L)
        w = torch.softmax(logits, dim=-1)  # (models, batch, 1, L, L)
        heads = (w.squeeze(2) @ v).view(models, batch * length, self.d_v)
        out = torch.bmm(heads, w_o.transpose(1, 2))  # (models, batch * length, d_model)
        loss = (out - y.reshape(out.shape)).square().mean((1, 2))  # (models,)
        return loss, w, logits, self.scale

    def states(self) -> list[dict[str, torch.Tensor]]:
        return [
            {k: v[i].detach().cpu().clone() for k, v in self.params.items()}
            for i in range(self.lrs.shape[0])
        ]


def _logit_grad_stats(grad: torch.Tensor) -> dict[str, torch.Tensor]:
    """Norms of dL/dlogits ``(models, batch, heads, q_len, k_len)``: whole step and per row."""
    models = grad.shape[0]
    rows = grad.norm(dim=-1).reshape(models, -1)  # (models, rows)
    q = torch.quantile(rows, torch.tensor([0.1, 0.5, 0.9], device=grad.device), dim=1)
    return {
        "logit_grad_norm": grad.reshape(models, -1).norm(dim=1),
        "logit_grad_row_median": q[1],
        "logit_grad_row_p10": q[0],
        "logit_grad_row_p90": q[2],
    }


def _attention_stats(w: torch.Tensor, logits: torch.Tensor) -> dict[str, torch.Tensor]:
    """Attention statistics per model from ``(models, batch, heads, q_len, k_len)`` tensors."""
    models = w.shape[0]
    k_len = w.shape[-1]
    ent = -(w * w.clamp_min(1e-30).log()).sum(-1)  # (models, batch, heads, q_len)
    ent = ent.reshape(models, -1).mean(1)  # (models,)
    # Population variance of each row (no correction): 0, not NaN, for one-key rows.
    row_var = logits.var(dim=-1, correction=0).reshape(models, -1)  # (models, rows)
    return {
        "entropy": ent,
        "normalized_entropy": ent / math.log(k_len) if k_len > 1 else torch.zeros_like(ent),
        "max_probability": w.amax(-1).reshape(models, -1).mean(1),
        "logit_std": row_var.mean(1).sqrt(),
        "max_abs_logit": logits.abs().reshape(models, -1).amax(dim=1),
    }
