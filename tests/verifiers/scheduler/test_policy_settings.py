"""A policy's own settings live next to it and are registered; the scheduler config takes their fields as its own."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from verifiers.scheduler import SchedulerConfig, VoiTarget
from verifiers.scheduler.policies import policy_names, settings_models
from verifiers.scheduler.policies.voi_settings import VoiSettings


def test_voi_settings_are_registered_and_flat_in_the_scheduler_config() -> None:
    assert VoiSettings in settings_models()
    assert set(VoiSettings.model_fields) <= set(SchedulerConfig.model_fields)
    config = SchedulerConfig.model_validate({"policy": "voi", "voi_target": "advantage", "learning_value": 0.0})
    assert config.voi_target is VoiTarget.advantage and config.learning_value == 0.0
    assert SchedulerConfig().min_value_per_cost == VoiSettings().min_value_per_cost


def test_a_bad_voi_setting_names_the_field() -> None:
    with pytest.raises(ValidationError, match="learning_value"):
        SchedulerConfig.model_validate({"learning_value": -1.0})
    with pytest.raises(ValidationError, match="voi_target"):
        SchedulerConfig.model_validate({"voi_target": "hits"})


def test_an_unknown_policy_lists_the_registered_ones() -> None:
    with pytest.raises(ValidationError, match="unknown scheduler policy 'vio'; known: " + ", ".join(policy_names())):
        SchedulerConfig.model_validate({"policy": "vio"})
