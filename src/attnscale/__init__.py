"""attnscale: measure, explain and debug the 1/sqrt(d_k) scaling in attention.

Everything documented is importable from the top level, e.g.
``from attnscale import sample_scores``. The plot helpers are imported on
first use, so ``import attnscale`` does not import matplotlib (an optional
dependency: the ``plot`` extra, see the README).
"""

import importlib.util as _importlib_util
from typing import TYPE_CHECKING as _TYPE_CHECKING

from ._additive import AdditiveAttention as AdditiveAttention
from ._attention import AttentionResult as AttentionResult
from ._attention import scaled_dot_product_attention as scaled_dot_product_attention
from ._attention import soft_cap as soft_cap
from ._models import MODELS as MODELS
from ._models import AttentionBlock as AttentionBlock
from ._models import SimpleAttentionModel as SimpleAttentionModel
from ._models import make_model as make_model
from ._monitor import DESIGNS as DESIGNS
from ._monitor import GUIDE_URL as GUIDE_URL
from ._monitor import THRESHOLDS as THRESHOLDS
from ._monitor import AttentionMonitor as AttentionMonitor
from ._monitor import AttentionRecord as AttentionRecord
from ._monitor import AttentionStats as AttentionStats
from ._monitor import Finding as Finding
from ._monitor import HeadStats as HeadStats
from ._monitor import MonitorReport as MonitorReport
from ._monitor import head_stats as head_stats
from ._monitor import head_stats_of_logits as head_stats_of_logits
from ._multihead import MultiHeadAttention as MultiHeadAttention
from ._sampling import DISTRIBUTIONS as DISTRIBUTIONS
from ._sampling import VarianceEstimate as VarianceEstimate
from ._sampling import sample_scores as sample_scores
from ._sampling import variance_estimate as variance_estimate
from ._softmax import SoftmaxStats as SoftmaxStats
from ._softmax import gaussian_logit_entropy as gaussian_logit_entropy
from ._softmax import logit_gradient as logit_gradient
from ._softmax import max_probability as max_probability
from ._softmax import saturated_fraction as saturated_fraction
from ._softmax import softmax_entropy as softmax_entropy
from ._softmax import softmax_jacobian as softmax_jacobian
from ._softmax import softmax_jacobian_norm as softmax_jacobian_norm
from ._softmax import softmax_stats as softmax_stats
from ._softmax import tempered_softmax as tempered_softmax
from ._strategies import SCALING_STRATEGIES as SCALING_STRATEGIES
from ._strategies import CosineScale as CosineScale
from ._strategies import FoldedInit as FoldedInit
from ._strategies import InverseD as InverseD
from ._strategies import InverseSqrt as InverseSqrt
from ._strategies import LearnableTemperature as LearnableTemperature
from ._strategies import NoScale as NoScale
from ._strategies import QKLayerNorm as QKLayerNorm
from ._strategies import QKRMSNorm as QKRMSNorm
from ._strategies import ScoreScaling as ScoreScaling
from ._strategies import make_strategy as make_strategy
from ._theory import Moments as Moments
from ._theory import dot_product_moments as dot_product_moments
from ._theory import init_projection_variance as init_projection_variance
from ._theory import logit_resolution as logit_resolution
from ._theory import scaled_dot_product_moments as scaled_dot_product_moments
from ._theory import unit_variance_scale as unit_variance_scale
from ._training.config import TrainingConfig as TrainingConfig
from ._training.loop import train as train
from ._training.result import METRICS as METRICS
from ._training.result import TrainingResult as TrainingResult
from ._training.tasks import TASKS as TASKS
from ._training.tasks import make_task as make_task

__version__ = "0.1.0"

if _TYPE_CHECKING:  # for type checkers and the API reference; at run time see __getattr__
    from ._plotting import plot_monitor_series as plot_monitor_series
    from ._plotting import plot_monitor_summary as plot_monitor_summary
    from ._plotting import plot_probability_rows as plot_probability_rows
    from ._plotting import plot_seed_bands as plot_seed_bands
    from ._plotting import plot_strategy_curves as plot_strategy_curves
    from ._plotting import plot_training_metric as plot_training_metric

_PLOTTING = (
    "plot_monitor_series",
    "plot_monitor_summary",
    "plot_probability_rows",
    "plot_seed_bands",
    "plot_strategy_curves",
    "plot_training_metric",
)


def __getattr__(name: str) -> object:
    """Import the plot helpers (and so matplotlib) only when one is first used."""
    if name in _PLOTTING:
        try:
            from . import _plotting
        except ModuleNotFoundError as err:
            if (err.name or "").partition(".")[0] != "matplotlib":
                raise
            raise ImportError(
                f"attnscale.{name} draws with matplotlib, which is not installed: "
                'pip install "attnscale[plot]"'
            ) from err
        return getattr(_plotting, name)
    raise AttributeError(f"module 'attnscale' has no attribute {name!r}")


# Every public name once: what is imported above, and the plot helpers where matplotlib is
# installed (so that `from attnscale import *` works without the plot extra).
__all__ = sorted(
    [name for name in dir() if not name.startswith("_")]
    + (list(_PLOTTING) if _importlib_util.find_spec("matplotlib") else [])
)
