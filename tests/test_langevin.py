"""Adam Langevin Monte Carlo (``param_explore.langevin``) against a NumPy transcription of
its equations, its temperature against the stationary variance it implies, and its settings.

The reference is written from the rule (Ishfaq et al. 2024's Adam LMCDQN step as the
authors' released ``aSGLD`` orders it), in float64:

    m ← α₁ m + (1 − α₁) g,  v ← α₂ v + (1 − α₂) g²,  w ← w − η (g + a m/(√v + λ)) + √(2η/β) ε

on L(w) = Σ ½ k (w − c)², whose gradient k (w − c) it computes itself. The noise ε is passed
in: the test draws it with NumPy and writes it into the optimizer's ε before every step.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from torch.utils import _pytree as pytree

import param_explore as pe

pytestmark = pytest.mark.trains  # .ci/run runs these again under another kernel set

#: A 3-parameter quadratic: nn.Linear(2, 1)'s weight (1, 2) and bias (1,).
CURVATURE = [np.array([[2.0, 0.5]]), np.array([1.5])]
CENTRE = [np.array([[0.3, -0.7]]), np.array([0.2])]
START = [np.array([[1.0, 2.0]]), np.array([-1.0])]
SETTINGS = dict(lr=0.05, betas=(0.8, 0.9), eps=1e-3, bias_factor=0.5, temperature=0.02)
STEPS = 4


def noises(steps: int, seed: int = 7) -> list[list[np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [[rng.standard_normal(w.shape) for w in START] for _ in range(steps)]


def reference(eps_per_step, lr, betas, eps, bias_factor, temperature):
    """The iterates after every step, from the equations (float64)."""
    a1, a2 = betas
    w = [x.copy() for x in START]
    m = [np.zeros_like(x) for x in START]
    v = [np.zeros_like(x) for x in START]
    path = []
    for step_noise in eps_per_step:
        for i, e in enumerate(step_noise):
            g = CURVATURE[i] * (w[i] - CENTRE[i])
            m[i] = a1 * m[i] + (1 - a1) * g
            v[i] = a2 * v[i] + (1 - a2) * g * g
            drift = g + bias_factor * m[i] / (np.sqrt(v[i]) + eps)
            w[i] = w[i] - lr * drift + np.sqrt(2 * lr * temperature) * e
        path.append([x.copy() for x in w])
    return path


def network() -> torch.nn.Linear:
    net = torch.nn.Linear(2, 1)
    with torch.no_grad():
        for p, x in zip(net.parameters(), START):
            p.copy_(torch.as_tensor(x))
    return net


def loss_of(params) -> torch.Tensor:
    return sum(
        (0.5 * torch.as_tensor(k, dtype=torch.float32) * (p - torch.as_tensor(c)) ** 2).sum()
        for p, k, c in zip(params, CURVATURE, CENTRE)
    )


def write_noise(opt, step_noise) -> None:
    """ε of the coming step, passed in (as a caller that draws ε itself does)."""
    opt.resample_noise()  # creates ε where none was drawn
    for p, e in zip(opt.param_groups[0]["params"], step_noise):
        opt.state[p]["noise"].copy_(torch.as_tensor(e))
    opt.noise_changed()


def run_eager(eps_per_step, **settings):
    net = network()
    opt = pe.make_optimizer("langevin", net, **settings)
    path = []
    for step_noise in eps_per_step:
        write_noise(opt, step_noise)
        opt.zero_grad()
        with opt.training_params():
            loss_of(list(net.parameters())).backward()
        opt.step()
        path.append([p.detach().double().numpy().copy() for p in net.parameters()])
    return path


def run_traced(eps_per_step, **settings):
    """The same steps through ``traceable_step()`` (the compiled update's form), op by op."""
    net = network()
    opt = pe.make_optimizer("langevin", net, **settings)
    path = []
    for step_noise in eps_per_step:
        write_noise(opt, step_noise)
        step = opt.traceable_step()
        c = pytree.tree_map(
            lambda x: torch.tensor(x, dtype=torch.float32), step.coefficients(step.next_step())
        )
        means = [p.detach() for p in step.params]
        point = [t.clone().requires_grad_() for t in step.training_point(means, step.state, c)]
        loss_of(point).backward()
        step.advance()
        with torch.no_grad():
            step.update(means, [t.grad for t in point], step.state, c)
        path.append([p.detach().double().numpy().copy() for p in net.parameters()])
    return path


def assert_paths_close(actual, expected, rtol=1e-5, atol=1e-6):
    for step, (got, want) in enumerate(zip(actual, expected, strict=True)):
        for g, w in zip(got, want, strict=True):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"step {step + 1}")


@pytest.mark.parametrize("run", [run_eager, run_traced])
def test_steps_match_the_equations(run):
    eps = noises(STEPS)
    assert_paths_close(run(eps, **SETTINGS), reference(eps, **SETTINGS))


def test_noise_term_is_sqrt_of_two_eta_over_beta():
    """One step from rest (g = 0 at the centre, so m = v = 0): w moves by √(2η/β) ε exactly."""
    net = network()
    with torch.no_grad():
        for p, c in zip(net.parameters(), CENTRE):
            p.copy_(torch.as_tensor(c))
    opt = pe.make_optimizer("langevin", net, **SETTINGS)
    (step_noise,) = noises(1)
    write_noise(opt, step_noise)
    opt.zero_grad()
    loss_of(list(net.parameters())).backward()
    opt.step()
    scale = math.sqrt(2 * SETTINGS["lr"] * SETTINGS["temperature"])  # 0.0447
    for p, c, e in zip(net.parameters(), CENTRE, step_noise):
        np.testing.assert_allclose(p.detach().double().numpy() - c, scale * e, atol=1e-6)


def test_zero_temperature_is_the_deterministic_drift():
    """β⁻¹ = 0: the iterates are the drift's alone, whatever ε is."""
    cold = {**SETTINGS, "temperature": 0.0}
    path = run_eager(noises(STEPS, seed=1), **cold)
    assert_paths_close(path, run_eager(noises(STEPS, seed=2), **cold), rtol=0, atol=0)
    assert_paths_close(path, reference([[0 * e for e in n] for n in noises(STEPS)], **cold))


def test_stationary_variance_is_the_temperatures():
    """Plain Langevin (a = 0) on L = ½ k w²: 4096 independent chains (the rule is
    elementwise) reach the variance β⁻¹/(k(1 − ηk/2)) of the discretised chain.

    ηk = 0.05, so after 600 steps the start is forgotten (0.95^600 ≈ 4e-14); the sample
    variance of 4096 chains has a relative standard error √(2/4096) = 2.2 %: the margin of
    8 % is 3.6 of them (measured: 0.1 % off at this seed, at most 0.7 % over seeds 0-4).
    √(η/β) in place of √(2η/β) halves the variance."""
    torch.manual_seed(0)
    k, lr, temperature = 0.5, 0.1, 0.3
    w = torch.nn.Parameter(torch.full((4096,), 3.0))
    opt = pe.make_optimizer("langevin", [w], lr=lr, bias_factor=0.0, temperature=temperature)
    for _ in range(600):
        w.grad = k * w.detach()
        opt.step()
    expected = temperature / (k * (1 - lr * k / 2))
    measured = w.detach().double().var().item()
    assert measured == pytest.approx(expected, rel=0.08)
    assert w.detach().double().mean().item() == pytest.approx(
        0.0, abs=4 * math.sqrt(expected / 4096)
    )


def test_the_iterate_is_the_sample():
    """No σ of its own: sample() and the training point are the parameters, σ reads 0; the
    interface's ε is the next step's noise, drawn again after every step."""
    torch.manual_seed(0)
    net = network()
    opt = pe.make_optimizer("langevin", net)
    assert "langevin" in pe.SAMPLERS and "langevin" not in pe.available_optimizers()
    assert all(s is p for s, p in zip(opt.sample(), net.parameters()))
    before = [p.detach().clone() for p in net.parameters()]
    with opt.training_params():
        assert all(torch.equal(p, b) for p, b in zip(net.parameters(), before))
    assert all(not s.any() for s in opt.sampling_std())
    assert opt.perturbed() == [True, True]
    loss_of(list(net.parameters())).backward()
    opt.step()
    first = [opt.state[p]["noise"].clone() for p in net.parameters()]
    opt.step()
    assert not any(torch.equal(a, opt.state[p]["noise"]) for a, p in zip(first, net.parameters()))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"lr": 0.0}, "lr must be a finite number > 0"),
        ({"lr": float("nan")}, "lr must be a finite number > 0"),
        ({"betas": (1.0, 0.999)}, r"betas\[0\] must be in \[0, 1\)"),
        ({"betas": (0.9,)}, r"betas must be a pair"),
        ({"eps": 0.0}, "eps must be a finite number > 0"),
        ({"bias_factor": -0.5}, "bias_factor must be a finite number >= 0"),
        ({"temperature": -1e-4}, "temperature must be a finite number >= 0"),
        ({"temperature": float("inf")}, "temperature must be a finite number >= 0"),
        ({"lr": 3e38, "temperature": 3e38}, "noise scale sqrt.2 lr temperature. = .* outside"),
        ({"beta": 0.9}, r"unknown hyperparameter\(s\) .*beta \(did you mean betas\?\)"),
    ],
)
def test_bad_settings_are_refused_in_one_line_before_anything_is_built(overrides, message):
    with pytest.raises(ValueError, match=message) as err:
        pe.checked_hyperparameters("langevin", overrides)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=message):
        pe.make_optimizer("langevin", torch.nn.Linear(2, 1), **overrides)
