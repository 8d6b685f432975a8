"""The guide's full-budget experiments, one module each (see ``guide.stored``).

Site-only, no stability promise. Each public module defines ``EXPERIMENT``, an
``guide.stored.Experiment``; modules whose name starts with ``_`` hold shared code.
"""

from attnscale import _attention, _masks, _models, _multihead, _strategies
from attnscale._training import config, loop, result, stacks, tasks

#: The library modules that build the guide's models: part of a study's code hash.
MODEL_CODE = (_models, _multihead, _attention, _strategies, _masks)
#: ... and those that train them.
TRAINING_CODE = (tasks, config, result, stacks, loop, *MODEL_CODE)
