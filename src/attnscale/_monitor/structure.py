r"""Per-head structure of attention rows: a sink key, and a fixed offset.

A head can have a low entropy and be healthy, in two ways that its rows show:

- **a sink**: its rows park much of their mass on one key, the same key in every row (the
  first token, or a delimiter). Its entropy is low by construction; what can collapse is the
  rest of each row. For a row with weight $p_0$ on the sink and entropy $H$, the rest,
  renormalised, has entropy $H_\text{rest} = (H - h_b(p_0)) / (1 - p_0)$, with $h_b$ the
  binary entropy, out of at most $\log(n - 1)$ over the other $n - 1$ keys.
- **a positional pattern**: its rows put their largest weight at one fixed offset from the
  query (the previous token, the token itself). That is a one-hot row by design, not collapse.

The sampled statistics (``stats``) and those over every row (``every_row``) both reduce their
rows here, so both read a head alike. Each gives, per row: the index of the largest and of the
second largest valid key, the entropy, the count of valid keys and the weight on the head's
sink key (the key most of its rows put their largest weight on).
"""

from __future__ import annotations

import math

import torch

__all__ = [
    "FIELDS",
    "MIN_ROWS",
    "REST_FLOOR",
    "first_index",
    "head_structure",
    "padding_queries",
    "rest_entropy",
    "second_largest",
    "sink_keys",
    "top_two",
]

#: A head's structure is read from at least this many rows with two or more keys (NaN with
#: fewer: one decoding step's query row, a handful of rows, say nothing about a pattern across
#: rows; a single collapsed row would read as a sink). Over 16 causal rows of one sequence, a
#: head whose rows are one-hot on random keys puts at most about half of them at one offset.
MIN_ROWS = 16

#: A head whose rows leave less than this share of their mass off the sink, on average, has no
#: rest to measure: its rest entropy is NaN (the float32 entropy and sink weight of a row are
#: good to about 1e-6, which would swamp a rest of that size).
REST_FLOOR = 1e-3


def top_two(
    x: torch.Tensor, scratch: torch.Tensor | None = None, high: torch.Tensor | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Each row's largest entry, and the indices of its largest and second largest (the first
    on a tie), over the last axis of a float32 or float64 ``x``; masked entries must be -inf.
    ``x`` is changed and restored; ``scratch`` (``x``'s shape and dtype), where given, holds
    the temporaries; ``high`` (..., 1), where known, is each row's largest entry."""
    high = x.amax(-1, keepdim=True) if high is None else high
    top = first_index(x, high, scratch)
    return high.squeeze(-1), top.squeeze(-1), second_largest(x, top, high, scratch)


def second_largest(
    x: torch.Tensor, top: torch.Tensor, high: torch.Tensor, scratch: torch.Tensor | None = None
) -> torch.Tensor:
    """The index of each row's second largest entry, given the index ``top`` of its largest
    and the value ``high`` there (both shaped (..., 1)); any index, ``top`` included, where
    every other entry is -inf. ``x`` is changed and restored."""
    x.scatter_(-1, top, -math.inf)
    second = first_index(x, x.amax(-1, keepdim=True), scratch)
    x.scatter_(-1, top, high)
    return second.squeeze(-1)


# below any difference of two float32 logits, times it, lies below -2^24: it cannot reach
# an index's place; exact indices up to 2^24 keys
_APART = 1e30


def first_index(
    x: torch.Tensor, value: torch.Tensor, scratch: torch.Tensor | None = None
) -> torch.Tensor:
    """(..., 1): the index of the first entry of each row equal to ``value`` (..., 1), the
    row's maximum. ``max(dim)`` and ``argmax`` find it too, but on a CPU they take about 20
    times as long as ``amax``: here, the entries at the maximum score a countdown k..1 and the
    others far below it, and one ``amax`` picks the first."""
    k = x.shape[-1]
    countdown = torch.arange(k, 0, -1, dtype=x.dtype, device=x.device)
    apart = torch.sub(x, value, out=scratch) if scratch is not None else torch.sub(x, value)
    scored = torch.add(countdown, apart, alpha=_APART, out=apart)
    found = k - scored.amax(-1, keepdim=True).nan_to_num_(k, k, k)  # NaN, ±inf rows: index 0
    return found.clamp_(0, k - 1).long()


def padding_queries(
    masked: torch.Tensor, queries: int, rows: torch.Tensor | None = None
) -> torch.Tensor | None:
    """Which query rows are padding tokens, from ``masked`` (..., rows or 1, keys), True
    where a key is masked: in self-attention (as many keys as ``queries``, the query count)
    query i is padding where key i, its own token, is masked in every row, as a key padding
    mask masks it. A padding query still attends over the real keys, but its row says
    nothing about the model: the per-head statistics leave it out. ``rows``: the query
    position of each row of ``masked`` (all of them by default). Shaped (..., rows); None
    where the keys are not the queries (cross-attention, or keys appended to them)."""
    if masked.shape[-1] != queries or masked.shape[-2] == 0:
        return None  # (no rows: none to leave out)
    # (..., keys): keys no query sees; a minimum over bytes is ~30 times faster than all()
    own = masked.view(torch.uint8).amin(-2).bool()
    return own if rows is None else own[..., rows.to(own.device)]


def sink_keys(top: torch.Tensor, live: torch.Tensor, keys: int) -> torch.Tensor:
    """(heads,): the key (of ``keys``) that most live rows of each head, shaped (N, heads,
    rows), put their largest weight on; the lowest such key on a tie, 0 where a head has no
    live row."""
    heads = top.shape[1]
    bins = torch.arange(heads, device=top.device)[:, None] * keys + top
    return _counts(bins, live, heads, keys).argmax(-1)


#: The names of [head_structure][]'s rows, in order.
FIELDS = (
    "sink_key",
    "sink_weight",
    "rest_sum",
    "rest_mass",
    "rest_rows",
    "positional_share",
    "positional_offset",
)


def head_structure(
    *,
    entropy: torch.Tensor,
    n: torch.Tensor,
    p0: torch.Tensor,
    seen: torch.Tensor,
    top: torch.Tensor,
    second: torch.Tensor,
    sink: torch.Tensor,
    pos: torch.Tensor,
    keys: int,
) -> torch.Tensor:
    """Per head, one row of [FIELDS][] each, shaped (7, heads), float64: the sink key and its
    mean weight, the sums that give the rest's entropy (see [rest_entropy][]), and the share
    of rows at the most common offset and that offset; NaN where a head has fewer than
    ``MIN_ROWS`` live rows.

    Per row, shaped (N, heads, rows): ``entropy`` in nats, ``n`` the valid keys, ``p0`` the
    weight on the head's ``sink`` key (0 where ``seen``, the key is valid, is False), ``top``
    and ``second`` the largest and second largest valid keys (of ``keys``); ``pos`` (rows,)
    the position of each query. Rows with fewer than two valid keys are left out. A row's
    offsets are that of its largest key and, where that key is the sink, that of its second
    largest: a head that puts part of its mass on a sink and the rest on the previous token
    is positional.
    """
    live = n >= 2
    p0 = p0.clamp(0.0, 1.0)
    n_rest = n - seen.to(n.dtype)
    rest = live & (n_rest >= 2)  # rows with two or more keys besides the sink
    h_b = torch.special.entr(p0).add_(torch.special.entr(1 - p0))
    # each row's rest entropy H_rest / log(n - 1), weighted by its rest mass 1 - p0: a row that
    # is all sink adds nothing, and no row is divided by its 1 - p0
    weighted = (entropy - h_b).clamp_min_(0).div_(n_rest.clamp_min(2).log_())
    zero = torch.zeros((), dtype=p0.dtype, device=p0.device)
    sums = torch.stack(
        [
            live.to(p0.dtype),
            torch.where(live, p0, zero),
            torch.where(rest, weighted, zero),
            torch.where(rest, 1 - p0, zero),
            rest.to(p0.dtype),
        ]
    ).sum(dim=(1, 3), dtype=torch.float64)  # (5, heads)
    count, offset = _offsets(top, second, top == sink[:, None], pos, live, keys)
    rows = sums[0]
    per_row = torch.stack([sink.double(), sums[1], sums[2], count, offset]) / torch.stack(
        [torch.ones_like(rows), rows, torch.ones_like(rows), rows, torch.ones_like(rows)]
    ).clamp_min(1)
    per_row = per_row.where(rows >= MIN_ROWS, math.nan)
    return torch.stack([*per_row[:3], *sums[3:], *per_row[3:]])


def rest_entropy(total: torch.Tensor, mass: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """The rest's mean normalised entropy from the sums of [head_structure][]: NaN where the
    rows leave less than ``REST_FLOOR`` of their mass off the sink on average, or have none."""
    measured = (rows > 0) & (mass >= REST_FLOOR * rows)
    return torch.where(measured, total / mass.clamp_min(1e-300), math.nan)


def _counts(bins: torch.Tensor, keep: torch.Tensor, heads: int, width: int) -> torch.Tensor:
    """(heads, width): how many of the entries ``keep`` fall in each bin ``head · width +
    j``; the others go to one bin past the end, dropped (a mask would copy the kept ones)."""
    past = heads * width
    kept = torch.where(keep, bins, past).reshape(-1)
    return torch.bincount(kept, minlength=past + 1)[:past].view(heads, width)


def _offsets(
    top: torch.Tensor,
    second: torch.Tensor,
    at_sink: torch.Tensor,
    pos: torch.Tensor,
    live: torch.Tensor,
    keys: int,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per head: how many live rows look at the most common offset (key - query position),
    and that offset (the lowest on a tie), in float64. A row looks at the offset of its
    largest key and, where that key is the head's sink, at that of its second largest too."""
    heads = top.shape[1]
    low = int(pos[-1]) if pos.numel() else 0  # the last query: offsets are >= -low
    width = keys + low
    start = torch.arange(heads, device=top.device)[:, None] * width + low - pos.to(top.device)
    both = torch.cat([start + top, start + second])
    counts = _counts(both, torch.cat([live, live & at_sink]), heads, width)
    best, where = counts.max(-1)
    return best.double(), (where - low).double()
