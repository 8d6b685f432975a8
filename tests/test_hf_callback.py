"""The Trainer callback: the monitor over a real transformers Trainer run, logged by Trainer."""

from __future__ import annotations

import pytest
import torch

transformers = pytest.importorskip("transformers")
pytest.importorskip("accelerate")

from attnscale.hf import AttentionCallback  # noqa: E402


class _Tokens(torch.utils.data.Dataset):  # type: ignore[type-arg]
    def __init__(self) -> None:
        gen = torch.Generator().manual_seed(0)
        self.ids = torch.randint(0, 50, (32, 12), generator=gen)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def test_the_callback_logs_through_the_trainer(tmp_path: object) -> None:
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        n_layer=2, n_embd=32, n_head=2, n_positions=12, vocab_size=50, attn_implementation="sdpa"
    )
    model = transformers.GPT2LMHeadModel(config)
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path),
        max_steps=6,
        per_device_train_batch_size=4,
        gradient_accumulation_steps=2,
        logging_steps=100,
        report_to=[],
        use_cpu=True,
        save_strategy="no",
        disable_tqdm=True,
    )
    trainer = transformers.Trainer(model=model, args=args, train_dataset=_Tokens())
    callback = AttentionCallback(trainer, every=2, all_rows=True)
    trainer.train()
    assert callback.monitor is not None
    report = callback.monitor.report()
    assert [r.where for r in report.records] == ["transformer.h.0.attn", "transformer.h.1.attn"]
    steps = sorted({s.run_step for s in report.records[0].series})
    assert steps == [0, 2, 4]  # optimizer steps, two forward passes each
    logged = [e for e in trainer.state.log_history if "attn/step" in e]
    assert [e["attn/step"] for e in logged] == [0, 2, 4]
    key = "attn/transformer.h.1.attn/head0/max_logit"
    assert all(key in e and "step" in e for e in logged)  # Trainer.log adds its own step


def test_the_callback_rejects_what_it_sets() -> None:
    config = transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10)
    trainer = transformers.Trainer(
        model=transformers.GPT2LMHeadModel(config),
        args=transformers.TrainingArguments(output_dir="unused", report_to=[], use_cpu=True),
    )
    with pytest.raises(TypeError, match="log"):
        AttentionCallback(trainer, log=print)
    with pytest.raises(ValueError, match="every"):
        AttentionCallback(trainer, every=0)
