"""A real TRL ``GRPOTrainer`` set up for calling its loss path directly, for comparisons with our GRPO losses.

TRL has no standalone loss function: its loss lives in ``GRPOTrainer._compute_loss``.
The trainer built here never generates or rewards (its reward is 0, its prompt
dataset a placeholder of the right length); callers hand ``compute_loss`` the
inputs they built themselves. The loss-parity test and the GRPO update-throughput
benchmark (``benchmarks/grpo_step.py``) both use it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["trl_loss_trainer"]

_PROMPT = "<bos><gap_3.0_3.5><sep>"  # never generated from: only the dataset's length matters


def _zero_reward(completions: list[Any], **_: Any) -> list[float]:
    return [0.0] * len(completions)


def trl_loss_trainer(model: Any, tokenizer: Any, output_dir: str | Path, **config: Any) -> Any:
    """A ``trl.GRPOTrainer`` on ``model`` (a module or a saved model directory) in train mode, CPU, logging off.

    ``config`` are ``trl.GRPOConfig`` arguments (``per_device_train_batch_size``, ``num_generations``,
    ``loss_type``, ...); no checkpoints are saved and nothing is reported.
    """
    import datasets
    import trl

    args = trl.GRPOConfig(output_dir=str(output_dir), report_to="none", use_cpu=True, save_strategy="no", logging_steps=1, **config)
    data = datasets.Dataset.from_dict({"prompt": [_PROMPT] * args.per_device_train_batch_size})
    trainer = trl.GRPOTrainer(model=model, reward_funcs=_zero_reward, args=args, train_dataset=data, processing_class=tokenizer)
    trainer.current_gradient_accumulation_steps = 1
    trainer.model.train()
    return trainer
