r"""Seeded training runs on synthetic tasks, many models in one pass, with recorded metrics.

- [make_task][attnscale.make_task]: the synthetic tasks in [TASKS][attnscale.TASKS], generated
  in code from a seed.
- [train][attnscale.train]: trains every combination of strategies, learning rates and seeds in
  one call. Models that share a strategy are stacked along a leading *model* dimension
  (``torch.func.stack_module_state``) and run with ``torch.func.vmap`` over
  ``torch.func.functional_call``. A [SimpleAttentionModel][attnscale.SimpleAttentionModel] whose
  strategy only multiplies the logits by a constant (``"none"``, ``"inverse_sqrt"``,
  ``"inverse_d"``, ``"folded_init"``) runs instead with the batched matrix products written out,
  and neighbouring strategies of that kind share one stack (the same arithmetic with less
  overhead per step). The losses of a stack are summed before the backward pass, which leaves
  each model's gradient equal to the gradient of its own loss, and Adam is applied element-wise
  on the stacked tensors, so each model keeps its own optimizer state. The result equals
  sequential training of each model up to floating-point rounding.
- [TrainingConfig][attnscale.TrainingConfig]: the validated, frozen settings of a call, which the
  result carries.
- [TrainingResult][attnscale.TrainingResult]: the per-step metrics of every model as tensors of
  shape ``(models, steps)``, with helpers to average them per epoch and group them over seeds.
"""
