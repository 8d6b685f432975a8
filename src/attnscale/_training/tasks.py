"""The synthetic tasks, generated in code from a seed, and the seed of the mini-batch order."""

from __future__ import annotations

import math

import torch

from .. import _checks

__all__ = ["SHUFFLE_OFFSET", "TASKS", "make_task", "shuffle_seed"]

#: Synthetic tasks understood by [make_task][attnscale.make_task] and [train][attnscale.train].
TASKS: tuple[str, ...] = ("reconstruction", "mean", "retrieval")

SHUFFLE_OFFSET = 1_000_003  # the shuffle generator of seed s is seeded with s + this


def shuffle_seed(seed: int) -> int:
    """Seed of the mini-batch order for ``seed``: ``seed + 1000003``, wrapped into 64 bits."""
    return (seed + SHUFFLE_OFFSET) % (_checks.MAX_SEED + 1)


def make_task(
    task: str,
    num_samples: int,
    seq_len: int = 8,
    d_model: int = 128,
    *,
    generator: torch.Generator | None = None,
    seed: int | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    r"""Draw inputs and targets of a synthetic sequence task.

    All tasks return inputs ``x`` and targets ``y`` of shape ``(num_samples, seq_len, d_model)``.

    - ``"reconstruction"`` (the source article's task): $x \sim \mathcal{N}(0, I)$, $y = x$.
      Attention that is one-hot on the query's own token is optimal.
    - ``"mean"``: $x \sim \mathcal{N}(0, I)$ and every position's target is the mean of the
      sequence, $y_i = \frac1L \sum_j x_j$. Uniform attention is optimal; predicting zero scores
      $1/L$ (the variance of the mean).
    - ``"retrieval"``: a content-addressed copy. Each token $j$ carries a value
      $u_j \sim \mathcal{N}(0, I)$ in its first $\lceil d_{\text{model}}/2 \rceil$ coordinates
      and, in the rest, the sum of a *key* id embedding $e_K(a_j)$ and a *query* id embedding
      $e_Q(b_j)$, divided by $\sqrt2$ (ids from a vocabulary of $2L$, key ids distinct within a
      sequence, embeddings drawn once per call from $\mathcal{N}(0, I)$). Each query id names
      the key id of a random position $m(j)$ of the same sequence, and the target is
      $y_j = (u_{m(j)}, 0)$. The correct attention is one-hot on the token chosen by content;
      predicting zero scores about $\lceil d_{\text{model}}/2 \rceil / d_{\text{model}}$.

    Parameters
    ----------
    task : str
        One of [TASKS][attnscale.TASKS].
    num_samples : int
        Number of sequences.
    seq_len : int
        Sequence length $L$.
    d_model : int
        Token width (at least 2 for ``"retrieval"``).
    generator : torch.Generator, optional
        Source of randomness (CPU); exclusive with ``seed``.
    seed : int, optional
        Seed of a fresh generator, in $[0, 2^{64})$ (default 0 when neither is given).

    Returns
    -------
    tuple of Tensor
        ``(x, y)``, float32 on the CPU.

    Raises
    ------
    TypeError
        If a size or ``seed`` is not an integer or ``generator`` not a ``torch.Generator``.
    ValueError
        If the task is unknown, a size is not a positive integer or so large that torch cannot
        allocate the data, ``d_model < 2`` for ``"retrieval"``, ``seed`` is outside
        $[0, 2^{64})$, or both ``generator`` and ``seed`` are given.

    Examples
    --------
    >>> from attnscale import make_task
    >>> x, y = make_task("retrieval", 10, 8, 32, seed=0)
    >>> x.shape, y.shape
    (torch.Size([10, 8, 32]), torch.Size([10, 8, 32]))
    """
    task = _checks.one_of(task, "task", TASKS)
    n = _checks.positive_int(num_samples, "num_samples")
    length = _checks.positive_int(seq_len, "seq_len")
    d = _checks.positive_int(d_model, "d_model")
    _checks.allocation((n, length, d), torch.float32, "num_samples, seq_len or d_model")
    gen = _checks.make_generator(generator, seed)
    if task == "reconstruction":
        x = torch.randn(n, length, d, generator=gen)  # (samples, length, d_model)
        return x, x.clone()
    if task == "mean":
        x = torch.randn(n, length, d, generator=gen)  # (samples, length, d_model)
        return x, x.mean(dim=1, keepdim=True).expand(n, length, d).clone()
    if d < 2:
        raise ValueError(f"d_model must be >= 2 for task='retrieval', got {d}")
    d_val = (d + 1) // 2
    d_id = d - d_val
    vocab = 2 * length
    key_emb = torch.randn(vocab, d_id, generator=gen)  # (vocab, d_id)
    query_emb = torch.randn(vocab, d_id, generator=gen)  # (vocab, d_id)
    u = torch.randn(n, length, d_val, generator=gen)  # (samples, length, d_val)
    key_ids = torch.rand(n, vocab, generator=gen).argsort(dim=1)[:, :length]  # (samples, length)
    match = torch.randint(0, length, (n, length), generator=gen)  # (samples, length): m(j)
    query_ids = key_ids.gather(1, match)  # (samples, length)
    ids = (key_emb[key_ids] + query_emb[query_ids]) / math.sqrt(2)  # (samples, length, d_id)
    x = torch.cat([u, ids], dim=-1)  # (samples, length, d_model)
    target_u = u.gather(1, match.unsqueeze(-1).expand(n, length, d_val))  # (samples, length, d_val)
    y = torch.cat([target_u, torch.zeros(n, length, d_id)], dim=-1)  # (samples, length, d_model)
    return x, y
