"""How a pretrained model and the run's cold model are mixed: stacking against pseudo-BMA (Yao et al. 2018)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import norm

from verifiers.scheduler.config import LearnedSurrogateConfig
from verifiers.scheduler.surrogate import _blend, _mixture_scale, _mixture_std


def _lpd(y: np.ndarray, mean: np.ndarray, std: float) -> np.ndarray:
    return norm.logpdf(y, mean, std)


def test_stacking_keeps_two_models_that_are_each_right_somewhere_and_pseudo_bma_picks_one() -> None:
    rng = np.random.default_rng(0)
    y = rng.normal(0.0, 1.0, 200)
    bulk = np.arange(200) < 150  # model 0 knows the bulk, model 1 the tail
    m0 = np.where(bulk, y + rng.normal(0, 0.05, 200), y + 2.0)
    m1 = np.where(bulk, y + 0.8, y + rng.normal(0, 0.05, 200))
    lpd = np.stack([_lpd(y, m0, 0.1), _lpd(y, m1, 0.1)])
    w = _blend(lpd, "stacking")
    assert 0.6 < w < 0.9, w  # about the bulk's share, 0.75
    assert _blend(lpd, "pseudo-bma") in (0.0, 1.0) or not 0.01 < _blend(lpd, "pseudo-bma") < 0.99


def test_a_model_worse_everywhere_gets_no_weight_either_way() -> None:
    rng = np.random.default_rng(1)
    y = rng.normal(0.0, 1.0, 100)
    lpd = np.stack([_lpd(y, y + 1.0, 0.2), _lpd(y, y + rng.normal(0, 0.1, 100), 0.2)])
    assert _blend(lpd, "stacking") < 0.01 and _blend(lpd, "pseudo-bma") < 0.01
    assert _blend(lpd[::-1], "stacking") > 0.99  # and all of it the other way round
    assert _blend(np.zeros((2, 0)), "stacking") == 1.0  # nothing to score on: the pretrained model alone


def test_the_mixture_std_is_calibrated_on_the_out_of_fold_answers_within_bounds() -> None:
    rng = np.random.default_rng(2)
    y = rng.normal(0.0, 1.0, 400)
    # Two good models with independent errors: the mixture's mean averages the errors, so it is better than either
    # model's std says, and the calibration narrows it.
    oof = np.stack([y + rng.normal(0, 0.1, 400) + 0.05, np.full(400, 0.1), y + rng.normal(0, 0.1, 400) - 0.05, np.full(400, 0.1)])
    scale = _mixture_scale(0.5, oof, y)
    assert 0.5 <= scale < 0.9
    m = 0.5 * (oof[0] + oof[2])
    sd = _mixture_std(0.5, oof[1], oof[3]) * scale
    assert 0.86 <= np.mean(np.abs(y - m) <= 1.645 * sd) <= 0.94  # the scaled interval covers about 90%
    bad = oof.copy()
    bad[1] = bad[3] = 0.01  # over-confident models are widened, at most twofold
    assert _mixture_scale(0.5, bad, y) == 2.0
    wide = oof.copy()
    wide[3] = 5.0  # a wide model with a small weight does not set the width
    assert np.all(_mixture_std(0.95, wide[1], wide[3]) < 0.125)  # 0.1^0.95 5^0.05 = 0.122; pooled variances: 1.1
    assert _mixture_scale(1.0, oof, y) == 1.0  # no mixture, no scale


def test_the_blend_rule_is_a_setting_with_a_one_line_error() -> None:
    assert LearnedSurrogateConfig().blend == "stacking"
    assert LearnedSurrogateConfig(blend="pseudo-bma").blend == "pseudo-bma"
    with pytest.raises(ValueError, match="stacking"):
        LearnedSurrogateConfig(blend="average")
