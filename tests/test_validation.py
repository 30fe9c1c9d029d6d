"""Bad hyperparameters fail at construction with a message naming the problem."""

from __future__ import annotations

import pytest
import torch

import param_explore as pe


def params():
    return [torch.nn.Parameter(torch.zeros(3))]


def test_unknown_name_lists_the_valid_ones():
    with pytest.raises(ValueError) as err:
        pe.make_optimizer("vadamm", params())
    message = str(err.value)
    assert "vadamm" in message
    for name in pe.available_optimizers():
        assert name in message


def test_unknown_hyperparameter_lists_the_valid_ones():
    with pytest.raises(ValueError, match=r"unknown hyperparameter\(s\) beta2 .*sample_constant"):
        pe.make_optimizer("vadam", params(), beta2=0.9)


@pytest.mark.parametrize("name", pe.available_optimizers())
@pytest.mark.parametrize("lr", [0.0, -1e-3, float("nan"), float("inf"), "fast"])
def test_non_positive_learning_rate(name, lr):
    with pytest.raises(ValueError, match="lr must be a finite number > 0"):
        pe.make_optimizer(name, params(), lr=lr)


@pytest.mark.parametrize("name", ["adam-plain", "adam-explore", "vadam"])
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


@pytest.mark.parametrize("name", ["sgd-explore", "adam-explore", "vadagrad"])
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
