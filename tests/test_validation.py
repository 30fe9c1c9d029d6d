"""Bad hyperparameters fail at construction with a message naming the problem."""

from __future__ import annotations

import pytest
import torch

import param_explore as pe


def params():
    """A one-layer network: every strategy accepts it (noisy K-FAC needs the module)."""
    return torch.nn.Linear(3, 1)


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        pe.make_optimizer("vadamm", params())
    message = str(err.value)
    assert "vadamm" in message
    for name in pe.available_optimizers():
        assert name in message


def test_unknown_hyperparameter_lists_the_valid_ones():
    with pytest.raises(
        ValueError,
        match=r"unknown hyperparameter\(s\) for optimizer 'vadam': beta2 .*sample_constant",
    ):
        pe.make_optimizer("vadam", params(), beta2=0.9)


@pytest.mark.parametrize("name", pe.available_optimizers())
@pytest.mark.parametrize("lr", [0.0, -1e-3, float("nan"), float("inf"), "fast"])
def test_non_positive_learning_rate(name, lr):
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        pe.make_optimizer(name, params(), lr=lr)


@pytest.mark.parametrize(
    "name", ["adam-plain", "adam-explore", "vadam", "noisy-adam", "param-noise"]
)
@pytest.mark.parametrize("betas", [(1.0, 0.999), (0.9, 1.0), (-0.1, 0.9), (0.9,), "0.9"])
def test_betas_outside_unit_interval(name, betas):
    with pytest.raises(ValueError, match="betas"):
        pe.make_optimizer(name, params(), betas=betas)


def test_vadagrad_beta2_outside_unit_interval():
    with pytest.raises(ValueError, match=r"beta2 must be in \[0, 1\)"):
        pe.make_optimizer("vadagrad", params(), beta2=1.0)


def test_adam_explore_precision_betas():
    with pytest.raises(ValueError, match=r"precision_betas\[1\]"):
        pe.make_optimizer("adam-explore", params(), precision_betas=(0.9, 1.5))


@pytest.mark.parametrize("key", ["sample_constant", "prior_precision"])
def test_negative_sample_constant_or_prior(key):
    with pytest.raises(ValueError, match=f"{key} must be a finite number >= 0"):
        pe.make_optimizer("vadam", params(), **{key: -1.0})


def test_vadam_needs_a_positive_initial_sampling_precision():
    with pytest.raises(ValueError, match="initial sampling precision"):
        pe.make_optimizer("vadam", params(), sample_constant=0.0, prior_precision=0.0)


@pytest.mark.parametrize("name", ["sgd-explore", "adam-explore", "vadagrad", "noisy-kfac"])
@pytest.mark.parametrize("value", [0.0, -5.0])
def test_non_positive_initial_precision(name, value):
    with pytest.raises(ValueError, match="initial_precision must be a finite number > 0"):
        pe.make_optimizer(name, params(), initial_precision=value)


def test_non_positive_num_data():
    with pytest.raises(ValueError, match="num_data"):
        pe.make_optimizer("vadam", params(), num_data=0)


def test_table3_defaults():
    """The registry's defaults are Table 3 of the appendix (and Appendix K's text)."""
    expected = {
        "vadagrad": dict(lr=1e-2, beta2=0.99, initial_precision=1e4),
        "vadam": dict(lr=1e-4, betas=(0.9, 0.999), prior_precision=1e-8, sample_constant=1e4),
        "sgd-plain": dict(lr=1e-4),
        "adam-plain": dict(lr=1e-4, betas=(0.9, 0.999), eps=1e-8),
        "sgd-explore": dict(lr=1e-4, precision_lr=1e-2, initial_precision=1e4),
        "adam-explore": dict(
            lr=1e-4, betas=(0.9, 0.999), precision_lr=1e-2, precision_betas=(0.9, 0.999),
            eps=1e-8, initial_precision=1e4,
        ),
    }  # fmt: skip
    for name, values in expected.items():
        defaults = pe.hyperparameters(name)
        for key, value in values.items():
            assert defaults[key] == value, (name, key)


def test_noisy_adam_vo_needs_an_initial_precision():
    with pytest.raises(ValueError, match="initial_precision > 0"):
        pe.make_optimizer("noisy-adam", params(), initial_precision=0.0)
    pe.make_optimizer("noisy-adam", params(), initial_precision=0.0, kl_weight=1.0)  # VI: fine


@pytest.mark.parametrize(
    ("name", "key", "value", "message"),
    [
        ("noisy-adam", "kl_weight", -1.0, "kl_weight must be a finite number >= 0"),
        ("noisy-adam", "prior_variance", 0.0, "prior_variance must be a finite number > 0"),
        ("noisy-kfac", "damping", -0.1, "damping must be a finite number >= 0"),
        ("noisy-kfac", "inverse_interval", 2.5, "inverse_interval must be an integer >= 1"),
        ("noisy-kfac", "beta", 0.0, "beta must be a finite number > 0"),
        ("param-noise", "adaptation_factor", 1.0, "adaptation_factor must be > 1"),
        ("param-noise", "target_distance", 0.0, "target_distance must be a finite number > 0"),
        ("param-noise", "initial_std", -1.0, "initial_std must be a finite number > 0"),
        ("param-noise", "adaptation_interval", 0, "adaptation_interval must be an integer >= 1"),
    ],
)
def test_new_strategy_hyperparameters(name, key, value, message):
    with pytest.raises(ValueError, match=message):
        pe.make_optimizer(name, params(), **{key: value})


def test_noisy_kfac_vi_beta_is_a_moving_average_weight():
    with pytest.raises(ValueError, match=r"beta is a moving-average weight in \(0, 1\]"):
        pe.make_optimizer("noisy-kfac", params(), kl_weight=1.0, beta=2.0)


def test_zhang_and_plappert_defaults():
    """VO readings of Zhang et al. (class docstrings) and Plappert et al.'s DDPG setting."""
    expected = {
        "noisy-adam": dict(lr=1.0, betas=(0.9, 0.99), kl_weight=0.0, initial_precision=1e4),
        "noisy-kfac": dict(
            lr=1.0, beta=0.01, kl_weight=0.0, initial_precision=1e4, stats_interval=10,
            inverse_interval=100,
        ),
        "param-noise": dict(
            lr=1e-4, betas=(0.9, 0.999), initial_std=0.2, target_distance=0.2,
            adaptation_factor=1.01, adaptation_interval=50,
        ),
    }  # fmt: skip
    for name, values in expected.items():
        defaults = pe.hyperparameters(name)
        for key, value in values.items():
            assert defaults[key] == value, (name, key)
