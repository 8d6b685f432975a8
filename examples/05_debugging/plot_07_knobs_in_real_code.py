r"""# Where the scale lives in real code

Every attention library has a knob for the scale, and some have one for a soft-cap. This page
runs each knob on torch: the `scale=` argument of PyTorch's SDPA, FlexAttention's `score_mod`
(the route to a soft-cap, which SDPA lacks), FlashAttention's `softmax_scale` and `softcap`,
Hugging Face's `self.scaling`, and Gemma's `query_pre_attn_scalar`. The attention monitor reads
the result, and says so where it cannot.
"""

# %%
SEED = 0
BATCH, HEADS, SEQ, HEAD_DIM = 2, 4, 16, 16
D_MODEL = HEADS * HEAD_DIM
CAP = 5.0  # a small soft-cap, so that it matters at this size (Gemma 2 uses 50)
# Gemma-2-9B's query_pre_attn_scalar, as first converted and as fixed (transformers
# #31891)
GEMMA2_9B_SCALAR = {"converted": 224, "fixed (head_dim)": 256}

import inspect
import math
import textwrap
import time
import warnings
from collections.abc import Callable

import torch
import transformers
from torch.nn import functional as F

import attnscale
from attnscale import AttentionMonitor, MonitorReport
from guide import zoo  # tiny-config builders, used by this site and its tests

start = time.perf_counter()
print(f"torch {torch.__version__}, transformers {transformers.__version__}")
gen = torch.Generator().manual_seed(SEED)
q, k, v = (torch.randn(BATCH, HEADS, SEQ, HEAD_DIM, generator=gen) for _ in range(3))


def finding(report: MonitorReport, code: str) -> str:
    """The first finding with this code, as 'SEVERITY: message' folded to the page
    width; the link to the guide on lines of its own (it fills one)."""
    f = next((f for f in report.findings if f.code == code), None)
    if f is None:
        return f"no {code} finding"
    body, _, link = f.message.rpartition(" See ")
    if not link.startswith("http"):
        body, link = f.message, ""
    text = fold(f"{f.severity.upper()}: {body}")
    return f"{text}\nSee:\n{link}" if link else text


def fold(text: str, indent: str = "") -> str:
    """A printed line folded to the 88 columns of the output box, its continuation lines
    indented under it. The width is narrowed where a long word would leave a short
    line inside the paragraph: the Chinese edition reads a short line as the
    paragraph's end."""
    for width in range(88, 70, -1):
        lines = textwrap.wrap(
            text,
            width,
            initial_indent=indent,
            subsequent_indent=indent + "    ",
            break_on_hyphens=False,
            break_long_words=False,
        )
        if all(len(line) >= 60 for line in lines[:-1]):
            break
    return "\n".join(lines)


def scale_line(report: MonitorReport) -> str:
    """What the monitor read at the first call site: the scale, its source, scale x
    sqrt(d_h)."""
    s = report.records[0].last
    return (
        f"{report.records[0].where}: scale {s.scale:.4g} ({s.scale_source}), head_dim "
        f"{s.head_dim}, scale x sqrt(head_dim) = {s.scale_ratio:.3g}, softcap "
        f"{s.softcap}"
    )


# %%
# ## PyTorch SDPA: `scale=`
#
# `torch.nn.functional.scaled_dot_product_attention` takes the scale as an argument since
# PyTorch 2.1. Left at `scale=None`, it uses $1/\sqrt{E}$, with $E$ the last axis of the query:
# the head size. Passing that value explicitly gives the same output; so does writing the
# attention out by hand.

sdpa_doc = " ".join(F.scaled_dot_product_attention.__doc__.split("->")[0].split())
print(fold(f"documented signature: {sdpa_doc}"))
default = F.scaled_dot_product_attention(q, k, v)
explicit = F.scaled_dot_product_attention(q, k, v, scale=1 / math.sqrt(HEAD_DIM))
by_hand = torch.softmax(q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM), dim=-1) @ v
print(
    f"max |scale=None - scale=1/sqrt({HEAD_DIM})| = "
    f"{(default - explicit).abs().max():.2e}"
)
print(f"max |scale=None - by hand|            = {(default - by_hand).abs().max():.2e}")

# %%
# The common mistake is the wrong size under the root: $1/\sqrt{d_\text{model}}$ instead of
# $1/\sqrt{d_\text{head}}$. SDPA applies whatever it is given. The monitor reads the argument
# at the call, compares it with $1/\sqrt{d_\text{head}}$ for the head size it sees, and names
# the likely cause.

with AttentionMonitor() as monitor:
    F.scaled_dot_product_attention(
        q, k, v, scale=1 / math.sqrt(D_MODEL)
    )  # bug: d_model
wrong_sdpa = monitor.report()
print(fold(scale_line(wrong_sdpa)))
print(finding(wrong_sdpa, "scale-mismatch"))

# %%
# ## A soft-cap: not in SDPA, so FlexAttention's `score_mod`
#
# SDPA's signature above has no soft-cap argument: it computes
# $\mathrm{softmax}(c\,QK^\top + M)\,V$ and nothing can be inserted between the scaled scores
# and the softmax. That is why Gemma 2's $\kappa\tanh(s/\kappa)$ cap disappeared on backends
# that routed it through a kernel without one: `transformers` made eager attention Gemma 2's
# default because SDPA gave worse results (PR #32865), lm-evaluation-harness saw Gemma-2-9B's
# IFEval collapse off the eager path (#2252), and vLLM and sglang had backends that ignored the
# cap (links below). Step 4 of this checklist ([a soft-cap dropped by one code
# path](plot_02_soft_cap.md)) shows what the monitor sees when that happens.
#
# FlexAttention (`torch.nn.attention.flex_attention`) is PyTorch's route: a `score_mod`
# function receives each scaled score with its batch, head, query and key indices and returns
# the score to use. Here it applies the cap. Called outside `torch.compile`, it runs an unfused
# reference implementation and says so in a `UserWarning`; the cell silences exactly that
# message. The result is compared with [scaled_dot_product_attention][attnscale.scaled_dot_product_attention]
# from attnscale with `softcap=`, and with SDPA, which has no cap.

from torch.nn.attention.flex_attention import flex_attention

signature = f"flex_attention{inspect.signature(flex_attention)}"[:150] + " ..."
print(textwrap.fill(signature, 88, subsequent_indent="    ", break_on_hyphens=False))


def soft_cap(
    score: torch.Tensor,
    batch: torch.Tensor,
    head: torch.Tensor,
    q_idx: torch.Tensor,
    k_idx: torch.Tensor,
) -> torch.Tensor:
    """FlexAttention's score_mod: the scaled score of one (batch, head, query, key)."""
    return CAP * torch.tanh(score / CAP)


big_q, big_k = (
    3 * q,
    3 * k,
)  # larger q and k, as after training: raw logits pass the cap
with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore", message="flex_attention called without torch.compile"
    )
    with AttentionMonitor() as monitor:
        flex = flex_attention(big_q, big_k, v, score_mod=soft_cap)
    flex_report = monitor.report()
    flex_again = flex_attention(big_q, big_k, v, score_mod=soft_cap)
with AttentionMonitor() as monitor:
    capped = attnscale.scaled_dot_product_attention(big_q, big_k, v, softcap=CAP).output
capped_report = monitor.report()
uncapped = F.scaled_dot_product_attention(big_q, big_k, v)
print(f"max |flex - attnscale softcap={CAP:g}| = {(flex - capped).abs().max():.2e}")
print(f"max |flex - SDPA (no cap)|        = {(flex - uncapped).abs().max():.3f}")
print(
    f"flex output the same with and without the monitor: "
    f"{torch.equal(flex, flex_again)}"
)

# %%
# The capped computations agree with each other, and differ from SDPA's uncapped output by
# far more. Called eagerly, `flex_attention` compiles itself internally but still runs one
# operator, the `flex_attention` higher-order operator, through torch's function dispatch, with
# q, k, v, the traced `score_mod`, the block mask and the scale as its arguments. The monitor
# handles that operator: it recomputes the scores of the sampled rows, applies `score_mod` and
# the block mask to them as the kernel does, and measures what `score_mod` does to the scale on
# a probe: its slope at a score of zero, per head. A score_mod that multiplies the scores
# changes the scale; a bias (ALiBi) or a soft-cap, whose slope at zero is 1, does not. So the
# capped call reads as plain $1/\sqrt{d_h}$, as the explicit soft-capped attention does (which
# also reports its cap):

print(fold(scale_line(flex_report)))
print(fold(scale_line(capped_report)))

# %%
# The same probe catches a scale applied twice: once by `flex_attention` (its default
# $1/\sqrt{E}$), and once more inside a `score_mod` written for kernels that take raw scores.


def scaled_again(
    score: torch.Tensor,
    batch: torch.Tensor,
    head: torch.Tensor,
    q_idx: torch.Tensor,
    k_idx: torch.Tensor,
) -> torch.Tensor:
    """A score_mod that divides by sqrt(head_dim) again: the bug."""
    return score / math.sqrt(HEAD_DIM)


with warnings.catch_warnings():
    warnings.filterwarnings(
        "ignore", message="flex_attention called without torch.compile"
    )
    with AttentionMonitor() as monitor:
        flex_attention(q, k, v, score_mod=scaled_again)
twice = monitor.report()
print(fold(scale_line(twice)))
print(finding(twice, "scale-mismatch"))

# %%
# **Compiled, FlexAttention is not seen.** `torch.compile(flex_attention)`, which is how
# `transformers` runs its `flex_attention` implementation, turns the operator into a generated
# kernel: nothing of it passes through torch's function dispatch, so the monitor's report for
# such a model is empty and says `no-attention` rather than passing in silence. The gradient at
# the logits is not recorded for FlexAttention either: it has no backward pass on the CPU,
# where this site is built and its tests run.

# %%
# ## FlashAttention: `softmax_scale` and `softcap`
#
# The `flash-attn` package needs a GPU build and is not installed here, so this call is shown,
# not run:
#
# ```python
# from flash_attn import flash_attn_func
#
# out = flash_attn_func(q, k, v, softmax_scale=None, causal=False, softcap=0.0)
# ```
#
# In `flash_attn/flash_attn_interface.py`, `q`, `k` and `v` are laid out
# `(batch, seqlen, nheads, headdim)`, not SDPA's `(batch, heads, seq, head_dim)`;
# `softmax_scale=None` means $1/\sqrt{\text{headdim}}$; `softcap=0.0` means no cap, and a
# positive value applies $\kappa\tanh(s/\kappa)$ to the already scaled scores (the package's
# reference implementation in `flash_attn/utils/testing.py` does it in that order); with
# `causal=True` the mask is aligned to the bottom-right corner when there are fewer queries
# than keys. Soft-capping arrived in release 2.6, for Gemma 2 and Grok. The torch function
# below does the same computation, written out, and the monitor reads its scale and its cap.


def flash_like(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    softmax_scale: float | None = None,
    causal: bool = False,
    softcap: float = 0.0,
) -> torch.Tensor:
    """FlashAttention's arithmetic in plain torch, on (batch, seqlen, nheads,
    headdim)."""
    q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # (batch, nheads, seqlen, headdim)
    if softmax_scale is None:
        softmax_scale = q.shape[-1] ** -0.5
    scores = (q * softmax_scale) @ k.transpose(
        -2, -1
    )  # (batch, nheads, seqlen_q, seqlen_k)
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    if causal:  # bottom-right aligned: query i sees keys up to i + seqlen_k - seqlen_q
        n_q, n_k = scores.shape[-2:]
        keep = torch.ones(n_q, n_k, dtype=torch.bool).tril(diagonal=n_k - n_q)
        scores = scores.masked_fill(~keep, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ v).transpose(
        1, 2
    )  # (batch, seqlen, nheads, headdim)


fa_q, fa_k, fa_v = (
    t.transpose(1, 2) for t in (big_q, big_k, v)
)  # FlashAttention's layout
with AttentionMonitor() as monitor:
    fa = flash_like(fa_q, fa_k, fa_v, softcap=CAP)
fa_report = monitor.report()
plain = flash_like(fa_q, fa_k, fa_v).transpose(1, 2)
print(
    f"max |flash_like(softcap={CAP:g}) - flex| = "
    f"{(fa.transpose(1, 2) - flex).abs().max():.2e}"
)
print(f"max |flash_like(defaults) - SDPA| = {(plain - uncapped).abs().max():.2e}")
print(fold(scale_line(fa_report)))

# %%
# ## Hugging Face: the module's `self.scaling`
#
# In `transformers`, the attention module computes its scale once, as an attribute, and every
# attention implementation reads it at each call: eager multiplies $QK^\top$ by it, the SDPA
# path passes it as `scale=`. The lines that set it, read from the installed Llama code:

init = inspect.getsource(
    transformers.models.llama.modeling_llama.LlamaAttention.__init__
)
for line in init.splitlines():
    if "self.scaling" in line or "self.head_dim =" in line:
        print(fold(line.strip()))

llama_reports = {}
for impl in ("eager", "sdpa"):
    model, inputs = zoo.build("llama", attn_implementation=impl, seed=SEED)
    attn = model.model.layers[0].self_attn
    with AttentionMonitor(model) as monitor:
        zoo.run(model, inputs)
    llama_reports[impl] = monitor.report()
    print(
        f"{impl:>5}: scaling = {attn.scaling:.4g}, head_dim**-0.5 = "
        f"{attn.head_dim**-0.5:.4g}"
    )
    print(fold(scale_line(llama_reports[impl]), indent=" " * 7))
    print(f"       warnings: {sorted(llama_reports[impl].codes('warning')) or 'none'}")

# %%
# One backend that forgets the scale is a real bug: mlc-llm's attention fallback passed a scale
# of 1.0 (mlc-llm #3426). In a Hugging Face model the same bug is the attribute set to 1.0;
# both paths read it, and the monitor reports it on both.

for impl in ("eager", "sdpa"):
    model, inputs = zoo.build(
        "llama", attn_implementation=impl, seed=SEED, bug="no-scale"
    )
    with AttentionMonitor(model) as monitor:
        zoo.run(model, inputs)
    report = monitor.report()
    print(f"{impl}: scaling = {model.model.layers[0].self_attn.scaling}")
    print(finding(report, "scale-mismatch"))

# %%
# ## Gemma: `query_pre_attn_scalar`, and a `head_dim` of its own
#
# Gemma 2 does not take the scale from the head size: its attention sets
# `self.scaling = query_pre_attn_scalar**-0.5`, a config value. Its config also sets
# `head_dim` separately, and in Gemma it need not equal `hidden_size / num_attention_heads`
# (the defaults of the installed `Gemma2Config`, printed below, differ; Mistral-Nemo does the
# same). A port that derives the head size from `hidden_size / num_attention_heads` gets the
# wrong scale, and that is the Gemma-2-9B bug: its converted config had the scalar at
# `hidden_size / num_attention_heads` instead of `head_dim` (transformers #31891).

init = inspect.getsource(
    transformers.models.gemma2.modeling_gemma2.Gemma2Attention.__init__
)
print(next(line.strip() for line in init.splitlines() if "self.scaling" in line))
defaults = transformers.Gemma2Config()
print(
    fold(
        f"Gemma2Config defaults: head_dim {defaults.head_dim}, hidden_size / "
        f"num_attention_heads = "
        f"{defaults.hidden_size} / {defaults.num_attention_heads} = "
        f"{defaults.hidden_size / defaults.num_attention_heads:g}, "
        f"query_pre_attn_scalar {defaults.query_pre_attn_scalar}"
    )
)
old, new = GEMMA2_9B_SCALAR.values()
print(
    f"Gemma-2-9B: scalar {old} instead of {new} makes the scale "
    f"{math.sqrt(new / old):.4f} x too large"
)

# %%
# The right scalar is the one the model was trained with, not a formula: it is `head_dim` (256)
# for Gemma-2-9B, but Gemma-2-27B's official config sets 144, which is
# `hidden_size / num_attention_heads` (4608 / 32), with a `head_dim` of 128. The tiny Gemma 2
# below is built as the 9B is: its scalar equals `head_dim`, and the port's mistake sets it to
# `hidden_size / num_attention_heads`.

model, inputs = zoo.build("gemma2", seed=SEED)
config, attn = model.config, model.model.layers[0].self_attn
per_head = config.hidden_size // config.num_attention_heads
print(
    f"head_dim {config.head_dim}, hidden_size / num_attention_heads = {per_head}, "
    f"query_pre_attn_scalar {config.query_pre_attn_scalar}"
)
print(
    fold(
        f"module scaling {attn.scaling:.4g} = head_dim**-0.5 "
        f"{config.head_dim**-0.5:.4g}; "
        f"a port's (hidden/heads)**-0.5 would be {per_head**-0.5:.4g}"
    )
)
with AttentionMonitor(model) as monitor:
    zoo.run(model, inputs)
gemma_ok = monitor.report()
print(fold(f"right: {scale_line(gemma_ok)}"))
print(f"warnings: {sorted(gemma_ok.codes('warning')) or 'none'}")

ported, inputs = zoo.build(
    "gemma2", seed=SEED, config_overrides={"query_pre_attn_scalar": per_head}
)
with AttentionMonitor(ported) as monitor:
    zoo.run(ported, inputs)
gemma_port = monitor.report()
print(fold(f"ported: {scale_line(gemma_port)}"))
print(finding(gemma_port, "scale-mismatch"))

# %%
# The monitor measures $d_\text{head}$ from the tensors (the size $q\cdot k$ sums over), not
# from a config, and compares the scale with $1/\sqrt{d_\text{head}}$; the soft-cap of Gemma 2's
# eager path is read too (`softcap` above). That catches a config value that disagrees with the
# head size, as in the 9B port, but it cannot tell a deliberate scalar (the 27B's 144 with a
# head size of 128) from a wrong one, and where $q\cdot k$ sums over more dimensions than the
# scale should count, the measured size is the wrong reference: DeepSeek's MLA, run with its
# projections absorbed, sums over 576 dimensions while its scale is $1/\sqrt{192}$ times YaRN's
# mscale correction (a public port that used $1/\sqrt{576}$ had a real bug). For such models,
# declare the reference scale with `AttentionMonitor(expected_scale=...)`.
#
# ## Where the article's assumptions stand today
#
# The article reasons about the original Transformer, which is **Post-LN**: each sub-layer is
# $\mathrm{LN}(x + \mathrm{Attention}(x))$ (Vaswani et al. 2017). Today's decoders are
# **Pre-LN**, $x + \mathrm{Attention}(\mathrm{LN}(x))$, which Xiong et al. (2020) showed trains
# without the learning-rate warm-up Post-LN needs. The order in which the first layer of each
# tiny model calls its sub-modules, recorded with forward hooks:

ORDER = ("ln_1", "attn", "ln_2", "mlp", "input_layernorm", "self_attn")
ORDER += (
    "post_attention_layernorm",
    "pre_feedforward_layernorm",
    "post_feedforward_layernorm",
)


def call_order(model: torch.nn.Module, inputs: dict[str, torch.Tensor]) -> list[str]:
    """Names of the first decoder layer's direct children, in the order they run."""
    layer = next(
        m
        for n, m in model.named_modules()
        if n.endswith("h.0") or n.endswith("layers.0")
    )
    seen: list[str] = []
    handles = [
        child.register_forward_pre_hook(lambda *_, name=name: seen.append(name))
        for name, child in layer.named_children()
        if name in ORDER
    ]
    zoo.run(model, inputs)
    for h in handles:
        h.remove()
    return seen


gemma3_config = transformers.Gemma3TextConfig(
    vocab_size=128,
    hidden_size=64,
    intermediate_size=128,
    num_hidden_layers=1,
    num_attention_heads=4,
    num_key_value_heads=2,
    head_dim=32,
    query_pre_attn_scalar=32,
    attn_implementation="eager",
)
with torch.random.fork_rng(devices=[]):
    torch.manual_seed(SEED)
    gemma3 = transformers.Gemma3ForCausalLM(gemma3_config).eval()
gemma3_inputs = {"input_ids": inputs["input_ids"]}
tiny = {
    "gpt2": zoo.build("gpt2", seed=SEED),
    "llama": zoo.build("llama", seed=SEED),
    "gemma2": zoo.build("gemma2", seed=SEED),
    "gemma3": (gemma3, gemma3_inputs),
}
for name, (m, x) in tiny.items():
    order = f"{name:>6}: {' -> '.join(call_order(m, x))}"
    print(textwrap.fill(order, 88, subsequent_indent=" " * 8, break_on_hyphens=False))

# %%
# Every one normalises before attention. Llama's `post_attention_layernorm` is, despite its
# name, the norm in front of its MLP; Gemma 2 and 3 also normalise each sub-layer's output
# before the residual add (`post_attention_layernorm`, `post_feedforward_layernorm`). Pre-LN normalises the *input* of the q and k projections, not q and k:
# their size still depends on $W_q$ and $W_k$, which training is free to grow, so the
# variance argument for $1/\sqrt{d_k}$ holds only as far as the weights keep unit-variance
# outputs. Gemma 3 goes further: it replaces Gemma 2's soft-cap with QK-norm, an RMSNorm on
# each head's queries and keys (Gemma Team 2025), and `transformers` shows the change in the
# configs and the modules. The RMS of q measured in the first layer of the tiny Llama
# (Pre-LN only) and the tiny Gemma 3 (QK-norm, whose gain starts at 1):

for key in ("attn_logit_softcapping", "final_logit_softcapping"):
    print(
        f"{key}: Gemma2Config {getattr(transformers.Gemma2Config(), key)}, "
        f"Gemma3TextConfig {getattr(transformers.Gemma3TextConfig(), key)}"
    )
g2_attn, g3_attn = (
    tiny["gemma2"][0].model.layers[0].self_attn,
    gemma3.model.layers[0].self_attn,
)
for name, a in (("Gemma 2", g2_attn), ("Gemma 3", g3_attn)):
    print(
        f"{name} attention has q_norm/k_norm: "
        f"{hasattr(a, 'q_norm')}/{hasattr(a, 'k_norm')}"
    )

rms: dict[str, float] = {}


def typical_rms(t: torch.Tensor, size: int) -> float:
    """Median RMS over vectors of ``size`` entries (a token, or one head of it)."""
    per_vector = t.unflatten(-1, (-1, size)).pow(2).mean(-1).sqrt()  # (..., vectors)
    return float(per_vector.median())


def record(name: str, size: int) -> Callable[..., None]:
    """A forward hook that stores the typical RMS of a module's input and output."""

    def hook(
        module: torch.nn.Module, args: tuple[torch.Tensor, ...], out: torch.Tensor
    ) -> None:
        rms[f"{name} in"] = typical_rms(
            args[0], args[0].shape[-1] if "proj" in name else size
        )
        rms[f"{name} out"] = typical_rms(out, size)

    return hook


llama_attn = tiny["llama"][0].model.layers[0].self_attn
hooks = [
    llama_attn.q_proj.register_forward_hook(
        record("llama q_proj", llama_attn.head_dim)
    ),
    g3_attn.q_norm.register_forward_hook(record("gemma3 q_norm", g3_attn.head_dim)),
]
zoo.run(*tiny["llama"])
zoo.run(gemma3, gemma3_inputs)
for h in hooks:
    h.remove()
print(
    f"Llama:   RMS of a token at the q_proj input {rms['llama q_proj in']:.3g} (after "
    f"RMSNorm), "
    f"of one head's q {rms['llama q_proj out']:.3g}"
)
print(
    f"Gemma 3: RMS of one head's q before q_norm {rms['gemma3 q_norm in']:.3g}, "
    f"after {rms['gemma3 q_norm out']:.3g}; scaling still {g3_attn.scaling:.4g}"
)
with AttentionMonitor(gemma3) as monitor:
    zoo.run(gemma3, gemma3_inputs)
print(fold(scale_line(monitor.report())))

# %%
# With QK-norm, the size of each head's q and k is set by the norm's gain, not by $W_q$ and
# $W_k$: at gain 1, where the tiny Gemma 3 starts (printed above), their entries have the unit
# mean square the article's variance argument assumes, and $|q\cdot k|/\sqrt{d_k}$ can be at
# most $g_q g_k\sqrt{d_k}$ ($g$: the largest gain) whatever the weights do. The gains are
# learnable, so training can still widen the logits, but only through them. The scale did not
# go away: Gemma 3 still multiplies by `query_pre_attn_scalar**-0.5`, and the monitor reads it.
#
# ## References
#
# - Vaswani et al. (2017), *Attention Is All You Need*, arXiv:1706.03762 (Post-LN).
# - Xiong et al. (2020), *On Layer Normalization in the Transformer Architecture*,
#   arXiv:2002.04745 (Pre-LN against Post-LN).
# - Gemma Team (2024), *Gemma 2*, arXiv:2408.00118 (soft-capping); Gemma Team (2025),
#   *Gemma 3 Technical Report*, arXiv:2503.19786 (QK-norm instead of the soft-cap).
# - Bug reports this page demonstrates:
#     - Gemma-2-9B's `query_pre_attn_scalar`:
#       [transformers#31891](https://github.com/huggingface/transformers/issues/31891).
#     - An attention fallback without the scale:
#       [mlc-llm#3426](https://github.com/mlc-ai/mlc-llm/pull/3426).
#     - The soft-cap and SDPA: eager attention made Gemma 2's default in `transformers`,
#       [transformers#32865](https://github.com/huggingface/transformers/pull/32865);
#       Gemma-2-9B's IFEval with and without eager attention in lm-evaluation-harness,
#       [lm-evaluation-harness#2252](https://github.com/EleutherAI/lm-evaluation-harness/issues/2252).
#     - vLLM backends without the soft-cap: a warning that output may be wrong off FlashInfer,
#       [vllm#6051](https://github.com/vllm-project/vllm/pull/6051), and Gemma 2 results that
#       differ between backends, [vllm#7419](https://github.com/vllm-project/vllm/issues/7419).
#     - sglang's FlashInfer backend ran Gemma 2 and Grok-1 uncapped:
#       [sglang#33915](https://github.com/sgl-project/sglang/issues/33915) and
#       [flashinfer#1193](https://github.com/flashinfer-ai/flashinfer/issues/1193).
# - FlashAttention's signature: `flash_attn/flash_attn_interface.py` in
#   [Dao-AILab/flash-attention](https://github.com/Dao-AILab/flash-attention).
# - API: [AttentionMonitor][attnscale.AttentionMonitor],
#   [scaled_dot_product_attention][attnscale.scaled_dot_product_attention].

print(f"page time: {time.perf_counter() - start:.1f} s")
