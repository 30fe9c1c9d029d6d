"""What is logged about a strategy's σ: its quantiles over the actor's weights, the median
of each layer, and the action distance its weight noise causes (``explore/*``).

The references are NumPy's: σ = 1/√(N s + λ + c) from Vadam's stored s (Khan et al.'s Alg.
2 l.3) and ``np.quantile``; the action distance from a NumPy forward pass of the actor at
weights drawn from the measurement generator's random numbers, redrawn here in the order
the docstring of ``DDPG.action_distance`` gives (minibatch indices, then ε per parameter).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

import param_explore as pe
from agents.common.callbacks import Callback
from agents.ddpg import DDPG
from agents.settings import DDPGSettings

SMALL = dict(hidden_sizes=[16, 16], batch_size=16, learning_starts=64, buffer_size=5000)


def trained_vadam(num_data: float = 300.0, sample_constant: float = 10.0):
    """Vadam on a two-layer net after steps with gradients of different sizes per weight,
    so that σ differs between weights and layers."""
    net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    opt = pe.make_optimizer("vadam", net, num_data=num_data, sample_constant=sample_constant)
    rng = np.random.default_rng(0)
    for _ in range(3):
        for p in net.parameters():
            p.grad = torch.as_tensor(rng.normal(size=p.shape) * rng.uniform(0, 5, size=p.shape),
                                     dtype=torch.float32)  # fmt: skip
        opt.step()
    return net, opt


def test_sigma_quantiles_and_layer_medians_are_numpys():
    num_data, c = 300.0, 10.0
    net, opt = trained_vadam(num_data, c)
    sigma = {
        name: 1 / np.sqrt(num_data * opt.state[p]["exp_avg_sq"].double().numpy() + 1e-8 + c)
        for name, p in net.named_parameters()
    }
    every = np.concatenate([s.ravel() for s in sigma.values()])
    assert np.ptp(every) > 0.01  # the weights' σ do differ
    stats = opt.exploration_statistics()
    for key, q in (("sigma_q10", 0.1), ("sigma_median", 0.5), ("sigma_q90", 0.9)):
        assert stats[key] == pytest.approx(np.quantile(every, q), rel=1e-6)
    for layer in ("0", "2"):
        joined = np.concatenate([sigma[f"{layer}.weight"].ravel(), sigma[f"{layer}.bias"].ravel()])
        assert stats[f"sigma_median/{layer}"] == pytest.approx(np.median(joined), rel=1e-6)
    assert stats["sigma_min"] == pytest.approx(every.min(), rel=1e-6)


def test_noise_free_strategies_report_sigma_statistics_only():
    stats = pe.make_optimizer("adam-plain", torch.nn.Linear(2, 2)).exploration_statistics()
    assert set(stats) == {"sigma_mean", "sigma_min", "sigma_max"}


@pytest.mark.parametrize("strategy", ["vadam", "fixed-noise", "param-noise", "noisy-kfac"])
def test_a_fresh_sample_leaves_the_acting_sample_and_draws_from_its_distribution(strategy):
    """The acting sample is unchanged by a fresh draw; 4000 fresh draws have the strategy's
    marginal σ per weight (noisy K-FAC's correlated draw included) within 10 %."""
    _, opt = trained_vadam() if strategy == "vadam" else (None, None)
    if opt is None:
        net = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
        opt = pe.make_optimizer(strategy, net)
    opt.resample_noise(torch.Generator().manual_seed(0))
    acting = {name: t.clone() for name, t in opt.named_sample().items()}
    generator = torch.Generator().manual_seed(1)
    draws = [opt.fresh_sample(generator) for _ in range(4000)]
    for name, theta in opt.named_sample().items():
        assert torch.equal(theta, acting[name])
    means = dict(zip(opt.param_names(), opt._params()))
    for (name, mean), sigma in zip(means.items(), opt.sampling_std()):
        spread = torch.stack([d[name] for d in draws]).double().std(dim=0)
        np.testing.assert_allclose(spread.numpy(), sigma.double().numpy(), rtol=0.1)
        centre = torch.stack([d[name] for d in draws]).double().mean(dim=0)
        np.testing.assert_allclose(centre.numpy(), mean.detach().double().numpy(),
                                   atol=float(4 * sigma.max() / np.sqrt(4000)))  # fmt: skip


def numpy_actor(obs: np.ndarray, weights: dict[str, np.ndarray], agent: DDPG) -> np.ndarray:
    h = obs
    layers = sorted({name.rpartition(".")[0] for name in weights}, key=lambda n: int(n[4:]))
    for k, layer in enumerate(layers):
        h = h @ weights[f"{layer}.weight"].T + weights[f"{layer}.bias"]
        if k < len(layers) - 1:
            h = np.maximum(h, 0.0)
    return np.tanh(h)  # in units of half the action range, about its centre


def test_the_action_distance_is_parameter_noises_on_a_fresh_sample():
    """d = √(mean (π_μ(s) − π_θ'(s))²) over a replay minibatch, actions in units of half the
    range (Pendulum's ±2), θ' = μ + σ ε' — by NumPy from the same random numbers."""
    config = DDPGSettings.from_values(
        {"strategy": "vadam", **SMALL, "optimizer_kwargs": {"sample_constant": 100.0}}
    )
    agent = DDPG("Pendulum-v1", config, seed=0, device="cpu")
    agent.learn(200)
    opt = agent.actor_optimizer
    replay = torch.Generator().set_state(agent.measure_generator.get_state())
    index = torch.randint(agent.buffer.size, (16,), generator=replay).numpy()
    obs = agent.buffer.obs[index].double().numpy()
    mean = {name: p.detach().double().numpy() for name, p in agent.actor.named_parameters()}
    theta = {}
    for (name, value), sigma in zip(mean.items(), opt.sampling_std()):
        epsilon = torch.randn(value.shape, generator=replay).double().numpy()
        theta[name] = value + sigma.double().numpy() * epsilon
    expected = np.sqrt(
        np.mean((numpy_actor(obs, mean, agent) - numpy_actor(obs, theta, agent)) ** 2)
    )
    stats = agent.exploration_statistics()
    assert stats["action_distance"] == pytest.approx(expected, rel=1e-4)
    assert stats["sigma_median"] == pytest.approx(0.1, rel=0.05)  # σ₀ = 1/√100


class LogsEveryStep(Callback):
    def on_step(self, agent) -> bool:
        agent.exploration_statistics()
        return True


@pytest.mark.parametrize("strategy", ["vadam", "param-noise"])
def test_measuring_never_moves_the_training(strategy):
    """A run that logs its statistics at every step trains as one that never logs: the
    same generator state and the same weights (the measurement draws from its own)."""
    config = DDPGSettings.from_values({"strategy": strategy, **SMALL, "compile": False})
    logged = DDPG("Pendulum-v1", config, seed=4, device="cpu")
    logged.learn(150, LogsEveryStep())
    quiet = DDPG("Pendulum-v1", config, seed=4, device="cpu")
    quiet.learn(150)
    assert torch.equal(logged.generator.get_state(), quiet.generator.get_state())
    for (name, a), b in zip(logged.actor.named_parameters(), quiet.actor.parameters()):
        assert torch.equal(a, b), name
    assert not torch.equal(logged.measure_generator.get_state(),
                           quiet.measure_generator.get_state())  # fmt: skip


def test_the_precision_example_reads_a_layer_normalised_runs_checkpoint(tmp_path, train_agent):
    """``examples/vadam_precision.py`` prints each perturbed layer's largest s, its σ and the
    shares of weights whose σ fell below 0.9 σ₀ and σ₀/2: the LayerNorm parameters Vadam never
    perturbs (their own parameter group) are left out, and N enters σ. Reference: the
    checkpoint's s read here, σ = 1/√(N s + λ + c), σ₀ = 1/√(λ + c)."""
    import subprocess
    import sys
    from pathlib import Path

    args = ["--env", "Pendulum-v1", "--opt", "vadam", "--steps", "300", "--eval-every", "300",
            "--eval-episodes", "1", "--no-compile", "--no-progress", "--logdir", "out",
            "--set", "hidden_sizes=[16,16]", "--set", "learning_starts=64",
            "--set", "layer_norm=true", "--set", "optimizer_kwargs.sample_constant=10",
            "--set", "optimizer_kwargs.num_data=1000"]  # fmt: skip
    result = train_agent(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    checkpoint = tmp_path / "out" / "Pendulum-v1" / "vadam" / "seed0" / "checkpoints" / "latest.pt"
    example = Path(__file__).resolve().parents[1] / "examples" / "vadam_precision.py"
    out = subprocess.run([sys.executable, str(example), str(checkpoint)], capture_output=True,
                         text=True, check=True).stdout  # fmt: skip
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[2:-1]}

    state = torch.load(checkpoint, weights_only=True)["actor_optimizer"]
    perturbed = [g for g in state["param_groups"] if g.get("perturb", True)]
    assert len(perturbed) < len(state["param_groups"])  # the LayerNorm group exists
    expected = {}
    for group in perturbed:
        for index, name in zip(group["params"], group["param_names"]):
            s = state["state"][index]["exp_avg_sq"].double().numpy()
            ratio = np.sqrt((1e-8 + 10) / (1000 * s + 1e-8 + 10))
            shares = [100 * np.mean(ratio < 0.9), 100 * np.mean(ratio < 0.5)]
            expected[name] = (s.size, s.max(), 1 / np.sqrt(1000 * s.max() + 1e-8 + 10), shares)
    assert set(rows) == {*expected, "all"} and not any("norm" in name for name in expected)
    for name, (size, s_max, sigma, shares) in expected.items():
        assert int(rows[name][0]) == size
        assert float(rows[name][2]) == pytest.approx(s_max, rel=1e-3)
        assert float(rows[name][3]) == pytest.approx(sigma, abs=1e-5)
        assert [float(x.rstrip("%")) for x in rows[name][4:]] == pytest.approx(shares, abs=0.01)
    assert float(rows["all"][3]) == pytest.approx(min(e[2] for e in expected.values()), abs=1e-5)
    assert any(e[3][0] > 0 for e in expected.values())  # some σ moved: the shares are not all 0
