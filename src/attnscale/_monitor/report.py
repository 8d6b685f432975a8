"""The monitor's report types and their text and dict forms."""

from __future__ import annotations

import dataclasses
import importlib.metadata
import math
import posixpath
import re
import textwrap
import tomllib
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

from .. import _checks

__all__ = [
    "GUIDE_URL",
    "SEVERITY_RANK",
    "AttentionRecord",
    "AttentionStats",
    "Finding",
    "MonitorReport",
    "Severity",
]


def _documentation_url() -> str:
    """The guide's address: the ``Documentation`` URL of the package's metadata
    (``[project.urls]`` in pyproject.toml, read from there in a source tree)."""
    try:
        urls: list[str] = importlib.metadata.metadata("attnscale").get_all("Project-URL") or []
    except importlib.metadata.PackageNotFoundError:
        pyproject = Path(__file__).resolve().parents[3] / "pyproject.toml"
        table = tomllib.loads(pyproject.read_text()) if pyproject.exists() else {}
        declared = table.get("project", {}).get("urls", {}).get("Documentation")
        urls = [f"Documentation, {declared}"] if declared else []
    for entry in urls:
        label, _, url = entry.partition(",")
        if label.strip() == "Documentation":
            return url.strip().rstrip("/") + "/"
    return ""


#: Base URL of the debugging-checklist section of the guide; each finding's
#: message links to one page below it. Pages are built from
#: ``examples/05_debugging/plot_*.py`` (MkDocs directory URLs).
GUIDE_URL = _documentation_url() + "generated/gallery/05_debugging/"

Severity = Literal["info", "warning", "error"]
SEVERITY_RANK: dict[str, int] = {"info": 0, "warning": 1, "error": 2}


@dataclasses.dataclass
class AttentionStats:
    r"""Statistics of one attention call (one step of a call site's time series).

    ``step`` counts the site's kept calls, in order; ``run_step`` is the monitor's step when
    the call ran (the optimizer's steps, or the monitored model's calls: see
    [AttentionMonitor][attnscale.AttentionMonitor]'s ``every``).

    Logit statistics are taken over entries that are finite and not masked;
    ``logit_std`` is the within-row standard deviation (softmax ignores a
    shift of a row, so this is the spread that matters). Probabilities are
    recomputed in float32 from the logits. Entropy, maximum probability and
    saturation are taken over query rows with at least two valid keys: a row
    with one valid key (the first row of causal attention) is one-hot by
    construction, and a row with none is counted in ``masked_rows`` instead.
    The [metric definitions][metric-definitions] give each formula.

    ``scale`` is the factor $c$ in $\mathrm{softmax}(c\,q\cdot k)$ as the
    monitor read it, and ``scale_source`` says how: ``"sdpa-argument"``,
    ``"sdpa-default"``, ``"multihead_attention"`` (the module always uses
    $1/\sqrt{d_h}$), ``"flex_attention"`` (its ``scale`` times the slope of
    its ``score_mod`` at zero, measured per head), ``"traced"`` (hand-written attention: the product of the
    scalar factors applied to $q$, $k$ and $QK^\top$ on the way to the
    softmax) or ``"fitted"`` (a least-squares fit of the softmax input against
    the $QK^\top$ product, when the path from one to the other went through
    operations the monitor does not follow; ``scale_fit_residual`` is its
    relative residual). ``softcap`` is the cap $t$ of a
    $t\tanh(x/t)$ soft-cap on that path. ``logit_grad_norm`` is the L2 norm of the
    gradient of the loss with respect to the softmax input, over the sampled
    batch elements and query rows, filled during backward; see
    [AttentionMonitor][attnscale.AttentionMonitor] for when it stays None.

    Masked entries are those a mask tensor masked (an additive mask of any value, a boolean
    mask, ``masked_fill`` or ``where``), or, where the monitor saw no mask tensor, logits at or
    below the ``mask_value`` threshold; ``-inf`` is always masked. ``mask_leak`` is the largest
    share of a row's probability that masked keys with a finite mask value still receive.

    ``scale_per_head`` holds one scale per head where a multiplier tensor gave the heads
    different ones (``scale`` is then their geometric mean); ``scale_learned`` says that a
    factor on the way was computed from a parameter (a learnable temperature);
    ``scale_range`` is the smallest and largest scale over the query positions where a factor
    changes with the position (a length temperature, as Llama 4's NoPE layers apply);
    ``qk_gain_learned`` says that q or k were multiplied by learned per-dimension gains. Key columns
    joined to the scores as attention sinks (``torch.cat`` with columns that are not
    q·k) are left out of the key set; ``sink_share`` is the mean probability they take.
    ``head_normalized_entropy`` and ``head_first_key_weight`` hold, per head, the mean
    normalised entropy and the mean weight on key 0 over the sampled rows, and
    ``head_saturated_fraction`` the share of its sampled rows that are saturated. The other
    ``head_*`` fields describe each head's structure (see ``attnscale._monitor.structure``):
    ``head_sink_key`` is the key most of its rows put their largest weight on and
    ``head_sink_weight`` the mean weight on it (a head that puts most of its mass on one key,
    the first token or a delimiter, is an attention sink); ``head_rest_entropy`` is the mean
    normalised entropy of the rest of each row without that key, renormalised, weighted by
    the rest's mass (NaN where the rows leave under 0.1% off it); ``head_positional_share`` is
    the share of rows whose largest key (the second largest, where the largest is the sink
    key) lies at the head's most common offset from the query, ``head_positional_offset``
    (-1: the previous token; 0: the token itself). A sink head is checked for collapse on its
    rest entropy, and a positional head is not read as collapsed.

    ``qk_norm_cv`` is how much the row norms of q and k vary (their larger coefficient of
    variation): about 0 when q and k are normalised per head (QK-norm, cosine attention).
    ``logit_bound`` is scale x max |q| x max |k| over the sampled rows, which bounds every
    logit; ``keys`` is the number of keys per row. ``shape`` is the shape of the score matrix
    the softmax runs over, (batch..., heads, queries, keys), on every path (SDPA, FlexAttention,
    ``nn.MultiheadAttention``, hand-written): its keys count every column of a row, the bias
    and zero keys ``nn.MultiheadAttention`` appends and sink columns included.

    ``heads`` holds, with ``AttentionMonitor(all_rows=True)``, per-head statistics over every
    query row of the call rather than a sample, for QK-Clip-style maxima: one list per
    statistic, one entry per head (see [head_stats][attnscale.head_stats]).
    None otherwise, and on the paths that do not give the monitor q and k or the full scores
    (``nn.MultiheadAttention``, FlexAttention).

    ``nonfinite_logits`` counts NaN and $+\infty$ logits; ``nonfinite_outputs``
    counts query rows with at least one valid key whose attention weights (or
    output, for SDPA) hold a non-finite value; ``nonfinite_inputs`` counts NaN and infinite
    entries of the sampled q and k, which come from before the attention. Rows with no valid
    key (every key masked) are
    ``masked_rows``, of which ``masked_rows_nonfinite`` have a non-finite
    output; ``first_masked_row`` is the index of the first of them (batch,
    head, query row).
    """

    step: int
    path: str
    shape: tuple[int, ...]
    dtype: str
    head_dim: int | None
    num_heads: int | None
    scale: float | None
    scale_ratio: float | None
    scale_source: str
    scale_fit_residual: float | None
    softcap: float | None
    q_std: float | None
    k_std: float | None
    max_abs_qk: float | None
    logit_mean: float
    logit_std: float
    max_abs_logit: float
    entropy: float
    normalized_entropy: float
    min_head_normalized_entropy: float
    max_probability: float
    saturated_fraction: float
    masked_fraction: float
    masked_rows: int
    masked_rows_nonfinite: int
    first_masked_row: tuple[int, ...] | None
    nonfinite_logits: int
    nonfinite_outputs: int
    sampled_rows: int
    logit_grad_norm: float | None = None
    mask_leak: float = 0.0
    scale_per_head: tuple[float, ...] | None = None
    scale_learned: bool = False
    sink_share: float | None = None
    head_normalized_entropy: tuple[float, ...] | None = None
    head_first_key_weight: tuple[float, ...] | None = None
    head_sink_key: tuple[float, ...] | None = None
    head_sink_weight: tuple[float, ...] | None = None
    head_rest_entropy: tuple[float, ...] | None = None
    head_positional_share: tuple[float, ...] | None = None
    head_saturated_fraction: tuple[float, ...] | None = None
    head_positional_offset: tuple[float, ...] | None = None
    qk_norm_cv: float | None = None
    logit_bound: float | None = None
    keys: int | None = None
    nonfinite_inputs: int = 0
    scale_range: tuple[float, float] | None = None
    qk_gain_learned: bool = False
    heads: dict[str, list[float | None]] | None = None
    run_step: int = 0

    def to_dict(self) -> dict[str, Any]:
        """Return the statistics as a dict that is strict JSON (``json.dumps(d,
        allow_nan=False)`` works): tuples become lists, and a float that is not finite, at
        any depth, becomes one of the strings ``"nan"``, ``"inf"`` and ``"-inf"`` (JSON has no
        NaN or infinity; a string keeps NaN and each infinity apart, where null would not).
        [from_dict][attnscale.AttentionStats.from_dict] reads them back as floats."""
        return {k: _jsonable(v) for k, v in dataclasses.asdict(self).items()}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AttentionStats:
        """The statistics saved with [to_dict][attnscale.AttentionStats.to_dict]: lists
        become tuples again, and the strings ``"nan"``, ``"inf"`` and ``"-inf"`` in a float
        field become those floats. A None where a number is required becomes NaN (older
        versions wrote every non-finite number as None).

        Raises
        ------
        TypeError
            If ``d`` is not a mapping.
        ValueError
            If ``d`` lacks a required statistic or holds an unknown one.
        """
        fields = {f.name: f for f in dataclasses.fields(cls)}
        required = [f.name for f in fields.values() if f.default is dataclasses.MISSING]
        _check_keys(d, "AttentionStats", required, fields)
        values: dict[str, Any] = {}
        for name, value in d.items():
            kind = str(fields[name].type)
            if "float" in kind:
                value = _from_json(value)
            if isinstance(value, list) and "tuple" in kind:
                value = tuple(value)
            elif value is None and kind in ("float", "int"):
                value = math.nan
            values[name] = value
        return cls(**values)


@dataclasses.dataclass
class AttentionRecord:
    """One attention call site and its statistics, one entry per call (step).

    Attributes
    ----------
    where : str
        Module path (``layers.0.self_attn``) or class path of the caller, with
        ``#i`` appended for the i-th attention in one module call (i > 0).
    kind : str
        ``"sdpa"``, ``"multihead_attention"``, ``"flex_attention"`` or ``"softmax(QK^T)"``.
    series : list of AttentionStats
        One entry per call, in order.
    """

    where: str
    kind: str
    series: list[AttentionStats] = dataclasses.field(default_factory=list)

    @property
    def last(self) -> AttentionStats:
        """Statistics of the most recent call."""
        return self.series[-1]

    def values(self, name: str) -> list[Any]:
        """Return one statistic over the series, e.g. ``values("entropy")``.

        Raises
        ------
        ValueError
            If ``name`` is not a field of [AttentionStats][attnscale.AttentionStats].
        """
        fields = [f.name for f in dataclasses.fields(AttentionStats)]
        _checks.one_of(name, "name", fields)
        return [getattr(s, name) for s in self.series]

    def to_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-serialisable dict."""
        return {
            "where": self.where,
            "kind": self.kind,
            "series": [s.to_dict() for s in self.series],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AttentionRecord:
        """The record saved with [to_dict][attnscale.AttentionRecord.to_dict].

        Raises
        ------
        TypeError, ValueError
            As [AttentionStats.from_dict][attnscale.AttentionStats.from_dict] says, for the
            record or one of its statistics.
        """
        keys = ("where", "kind", "series")
        _check_keys(d, "AttentionRecord", keys, keys)
        return cls(d["where"], d["kind"], [AttentionStats.from_dict(s) for s in d["series"]])


@dataclasses.dataclass
class Finding:
    """One diagnosis: what was measured, why it matters, how to fix it.

    Attributes
    ----------
    code : str
        One of the finding codes; the monitor's reference page lists them all, each with
        its guide page and meaning.
    severity : str
        ``"info"``, ``"warning"`` or ``"error"``.
    where : str
        The call site, as in [AttentionRecord][attnscale.AttentionRecord]:
        ``report.record(finding.where)`` is its record.
    message : str
        Measurement, consequence, fix and a link to the guide.
    step : int or None
        The call (step) of the site whose statistics gave the finding; ``None`` for
        findings about the model as a whole.
    sites : tuple of str
        Every site with the same finding (the same bug repeated in every layer is one
        finding); ``where`` is the one whose statistics the message quotes, at the
        highest severity among them. Empty for findings about the model as a whole.
    first_step : int or None
        Over a run (points at more than one monitor step): the first step at which any of
        the sites gave this finding, at any severity, so a growing max logit is dated.
        ``None`` otherwise.
    """

    code: str
    severity: Severity
    where: str
    message: str
    step: int | None = None
    sites: tuple[str, ...] = ()
    first_step: int | None = None

    def __post_init__(self) -> None:
        # stored as a tuple whatever sequence was given, so that a saved finding loads back equal
        self.sites = tuple(self.sites)

    def to_dict(self) -> dict[str, Any]:
        """Return the finding as a dict (``step`` an int or ``None``, ``sites`` a list, the
        rest strings)."""
        return {**dataclasses.asdict(self), "sites": list(self.sites)}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Finding:
        """The finding saved with [to_dict][attnscale.Finding.to_dict].

        Raises
        ------
        TypeError
            If ``d`` is not a mapping.
        ValueError
            If ``d`` lacks ``code``, ``severity``, ``where`` or ``message``, or holds an
            unknown key.
        """
        fields = [f.name for f in dataclasses.fields(cls)]
        _check_keys(d, "Finding", ("code", "severity", "where", "message"), fields)
        return cls(**{**d, "sites": tuple(d.get("sites", ()))})


@dataclasses.dataclass
class MonitorReport:
    """What an [AttentionMonitor][attnscale.AttentionMonitor] saw.

    Attributes
    ----------
    records : list of AttentionRecord
        One per call site, in order of first call.
    findings : list of Finding
        Sorted by severity (errors first).
    """

    records: list[AttentionRecord]
    findings: list[Finding]

    def __post_init__(self) -> None:
        # lists whatever sequences were given (tuples, or () for none), as from_dict builds them,
        # so that a report loads back equal to the one saved
        self.records = list(self.records)
        self.findings = list(self.findings)

    def by_severity(self, severity: str) -> list[Finding]:
        """Return the findings of one severity.

        Raises
        ------
        ValueError
            If ``severity`` is not ``"info"``, ``"warning"`` or ``"error"``.
        """
        _checks.one_of(severity, "severity", SEVERITY_RANK)
        return [f for f in self.findings if f.severity == severity]

    def codes(self, min_severity: str = "warning") -> set[str]:
        """Return the finding codes at ``min_severity`` or worse.

        Raises
        ------
        ValueError
            If ``min_severity`` is not a severity name.
        """
        _checks.one_of(min_severity, "min_severity", SEVERITY_RANK)
        rank = SEVERITY_RANK[min_severity]
        return {f.code for f in self.findings if SEVERITY_RANK[f.severity] >= rank}

    def record(self, where: str) -> AttentionRecord:
        """Return the record of one call site.

        Raises
        ------
        KeyError
            If no call site is called ``where``.
        """
        for r in self.records:
            if r.where == where:
                return r
        raise KeyError(
            f"no attention call site {where!r}; known: {[r.where for r in self.records]}"
        )

    def to_dict(self) -> dict[str, Any]:
        """Return a dict with ``records`` and ``findings`` that is strict JSON: non-finite
        statistics are written as the strings ``"nan"``, ``"inf"`` and ``"-inf"`` (see
        [AttentionStats.to_dict][attnscale.AttentionStats.to_dict]), so
        ``json.dumps(d, allow_nan=False)`` works and loggers and browsers accept it."""
        return {
            "records": [r.to_dict() for r in self.records],
            "findings": [f.to_dict() for f in self.findings],
        }

    def to_dataframe(self) -> Any:
        """Return a ``pandas.DataFrame`` with one row per measured call of each site: the
        columns ``where`` and ``kind``, then every field of
        [AttentionStats][attnscale.AttentionStats] (``run_step`` is the training step over a
        run; ``heads`` holds the per-head lists of ``all_rows=True``, or None).

        Raises
        ------
        ImportError
            If pandas is not installed.
        """
        try:
            import pandas as pd  # type: ignore[import-untyped,import-not-found,unused-ignore]
        except ImportError as e:
            raise ImportError(
                "MonitorReport.to_dataframe needs pandas: pip install pandas "
                "(or use to_dict, which needs nothing)"
            ) from e
        columns = ["where", "kind", *(f.name for f in dataclasses.fields(AttentionStats))]
        rows = [
            {"where": r.where, "kind": r.kind, **dataclasses.asdict(s)}
            for r in self.records
            for s in r.series
        ]
        return pd.DataFrame(rows, columns=columns)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> MonitorReport:
        """A report saved with [to_dict][attnscale.MonitorReport.to_dict] (for instance as
        JSON, ``json.dump(report.to_dict(), f)``), loaded back: its ``to_dict`` is the saved
        dict again, and it equals the report saved (statistics that are NaN aside, as NaN is
        unequal to itself); its text, findings and records read as before.

        Raises
        ------
        TypeError
            If ``d`` is not a mapping.
        ValueError
            If ``d`` lacks ``records`` or ``findings`` (the message names them), or a record,
            finding or statistic in it is malformed or unknown.
        """
        keys = ("records", "findings")
        _check_keys(d, "MonitorReport", keys, keys)
        return cls(
            records=[AttentionRecord.from_dict(r) for r in d["records"]],
            findings=[Finding.from_dict(f) for f in d["findings"]],
        )

    def __str__(self) -> str:
        """The report as text at most ``TEXT_WIDTH`` columns wide: a summary line, a table of
        the sites' last calls, then each finding with its message wrapped, the likely cause
        and the fix on lines of their own, and the guide page that explains it."""
        if not self.records:
            lines = ["AttentionMonitor: no attention computation was captured."]
        else:
            lines = [_summary(self.findings, len(self.records)), *_table(self.records)]
        lines.append("")
        if not self.findings:
            lines.append("No findings.")
        for f in self.findings:
            lines += _finding_lines(f)
        if any(_message_parts(f.message)[1] for f in self.findings):
            lines.append(_wrap(f"guide: {GUIDE_URL}<page>/", "", "  "))
        return "\n".join(lines)


#: The widest line of a report's text: a terminal, a notebook cell or a page of the guide
#: shows it without scrolling sideways.
TEXT_WIDTH = 88
_SITE_WIDTH = 32
# the table's columns after the site: (heading, width, statistic of the last call as text);
# the rest (kind, head_dim, dtype, max p, the number of calls) are in to_dataframe
_COLUMNS: tuple[tuple[str, int, Callable[[AttentionStats], str]], ...] = (
    ("scale/ref", 9, lambda s: _fmt(s.scale_ratio, ".3g")),
    ("logit sd", 8, lambda s: format(s.logit_std, ".3g")),
    ("max|logit|", 10, lambda s: format(s.max_abs_logit, ".3g")),
    ("H/log n", 7, lambda s: format(s.normalized_entropy, ".3f")),
    ("sat", 4, lambda s: format(s.saturated_fraction, ".2f")),
    ("nonfin", 6, lambda s: str(s.nonfinite_logits + s.nonfinite_outputs)),
)


def _summary(findings: list[Finding], sites: int) -> str:
    """The report's first line: how many sites, and how many findings at each severity."""
    counts = [sum(f.severity == s for f in findings) for s in ("error", "warning", "info")]
    return "AttentionMonitor report: call sites {} · errors {} · warnings {} · info {}".format(
        sites, *counts
    )


def _table(records: list[AttentionRecord]) -> list[str]:
    """The sites' table, its legend, and where the other statistics are."""
    head = f"{'site':<{_SITE_WIDTH}}" + "".join(f"  {h:>{w}}" for h, w, _ in _COLUMNS)
    lines = [head, "-" * len(head)]
    for r in records:
        cells = "".join(f"  {cell(r.last):>{w}}" for _, w, cell in _COLUMNS)
        lines.append(f"{_elide(r.where, _SITE_WIDTH):<{_SITE_WIDTH}}{cells}")
    return [
        *lines,
        "Each site's last call; scale/ref = scale × √head_dim, sat = share of saturated rows.",
        "More columns (kind, head_dim, dtype, max p) and every call: report.to_dataframe()",
    ]


def _finding_lines(f: Finding) -> list[str]:
    """One finding: its severity, code, sites and steps, then its message in parts."""
    steps = [] if f.step is None else [f"(step {f.step})"]
    if f.first_step is not None:
        steps.append(f"(first at run step {f.first_step})")
    # no-break spaces: a long header wraps before "(step 3)" or "(first at run step 12)"
    step = "".join(" " + s.replace(" ", "\xa0") for s in steps)
    where = f.where if len(f.sites) <= 1 else f"{len(f.sites)} sites: {compact(f.sites)}"
    # padded so the codes line up (and so the guide's translation tools read it as one line)
    tag = f"[{f.severity.upper()}]"
    header = _wrap(f"{tag:<10} {f.code} at {where}{step}", "", " " * 11)
    lines = [header.replace("\xa0", " ")]
    parts, page = _message_parts(f.message)
    lines += [_wrap(part, "    ", "      ") for part in parts]
    if page:
        lines.append(f"    guide: {page}")
    return lines


# the labelled parts a message is cut into, each printed from a line of its own
_PART = re.compile(r" (?=(?:Likely cause|Fix): )")
_SEE = re.compile(r"\s*See (\S+)$")


def _message_parts(message: str) -> tuple[list[str], str]:
    """A message's parts (the measurement, ``Likely cause:``, ``Fix:``), and the guide page
    its closing ``See <url>`` names, relative to the debugging section ("" if none)."""
    see = _SEE.search(message)
    root = GUIDE_URL.rsplit("/", 2)[0] + "/"  # the gallery, of which the section is a part
    page = ""
    if see and see[1].startswith(root):
        message = message[: see.start()]
        page = posixpath.relpath(see[1].rstrip("/"), GUIDE_URL.rstrip("/"))
    return _PART.split(message), page


def _wrap(text: str, indent: str, hanging: str) -> str:
    """``text`` wrapped at ``TEXT_WIDTH`` columns, its lines after the first indented more."""
    wrapper = _Wrapper(
        TEXT_WIDTH, initial_indent=indent, subsequent_indent=hanging, break_on_hyphens=False
    )
    return "\n".join(wrapper.wrap(text))


class _Wrapper(textwrap.TextWrapper):
    """A wrapper that breaks a word longer than a line (a long module path) after a dot, a
    slash or an underscore where it can, so that no line is wider than the width."""

    def _handle_long_word(
        self, reversed_chunks: list[str], cur_line: list[str], cur_len: int, width: int
    ) -> None:
        room = max(width - cur_len, 1)
        chunk = reversed_chunks[-1]
        cut = max(chunk.rfind(mark, 0, room) for mark in "./_") + 1
        end = cut if cut > 0 else room
        cur_line.append(chunk[:end])
        reversed_chunks[-1] = chunk[end:]


def compact(sites: tuple[str, ...] | list[str]) -> str:
    """Site names with runs of layer numbers folded: ``h.{0-11}.attn``."""
    groups: dict[str, list[int]] = {}
    plain: list[str] = []
    for site in sites:
        parts = site.split(".")
        numbered = [i for i, part in enumerate(parts) if part.isdigit()]
        if not numbered:
            plain.append(site)
            continue
        i = numbered[-1]
        template = ".".join([*parts[:i], "{}", *parts[i + 1 :]])
        groups.setdefault(template, []).append(int(parts[i]))
    out = list(plain)
    for template, numbers in groups.items():
        numbers = sorted(set(numbers))
        runs, start = [], numbers[0]
        for a, b in zip(numbers, [*numbers[1:], None], strict=True):
            if b != a + 1:
                runs.append(str(start) if start == a else f"{start}-{a}")
                start = b if b is not None else start
        label = runs[0] if len(numbers) == 1 else "{" + ",".join(runs) + "}"
        out.append(template.replace("{}", label))
    return ", ".join(out)


def _elide(s: str, n: int) -> str:
    """``s`` in at most ``n`` characters: its middle left out, so the model's top and the
    attention module's own name both show."""
    if len(s) <= n:
        return s
    tail = (n - 1) // 2
    return s[: n - 1 - tail] + "…" + s[-tail:]


def _fmt(v: float | int | None, spec: str) -> str:
    return "-" if v is None else format(v, spec)


#: How to_dict writes the floats that JSON has no number for.
_NONFINITE = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


def _jsonable(v: object) -> object:
    """``v`` as strict JSON: tuples as lists, non-finite floats as "nan", "inf" or "-inf"."""
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    if isinstance(v, tuple | list):
        return [_jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: _jsonable(x) for k, x in v.items()}
    return v


def _from_json(v: object) -> object:
    """The inverse of ``_jsonable`` for a float field (lists stay lists)."""
    if isinstance(v, str) and v in _NONFINITE:
        return _NONFINITE[v]
    if isinstance(v, list):
        return [_from_json(x) for x in v]
    if isinstance(v, dict):
        return {k: _from_json(x) for k, x in v.items()}
    return v


def _check_keys(d: object, what: str, required: Sequence[str], known: Iterable[str]) -> None:
    """Raise naming the missing or unknown keys of a dict that ``what.to_dict`` should have
    written."""
    if not isinstance(d, Mapping):
        raise TypeError(
            f"{what}.from_dict needs a dict as {what}.to_dict writes it, got {type(d).__name__}"
        )
    unknown = sorted(set(d) - set(known))
    if unknown:
        raise ValueError(f"unknown {what} fields: {unknown}")
    missing = [k for k in required if k not in d]
    if missing:
        keys = f", with the keys {', '.join(map(repr, required))}" if len(required) < 6 else ""
        raise ValueError(
            f"{what}.from_dict: the dict lacks {', '.join(map(repr, missing))}; it should be "
            f"one that {what}.to_dict wrote{keys}"
        )
