"""IVON (``--opt ivon``) against its authors' implementation, ``ivon-opt`` 0.1.3.

The same network, data and weight noise go through both: ``ivon-opt`` draws its perturbation
inside ``sampled_params`` as ``torch.randn(numel) / √(ess·(h + δ))`` from the global
generator, over the parameter group flattened; the same ε, drawn here from the same seed
and cut into the parameters' shapes, is put into this optimizer's state. Step by step the
means, h, σ and the momentum must agree to float64 rounding, for both Hessian estimates,
with and without clipping the mean's step. Then IVON runs where the toolkit runs it: SB3's
policy, ``train_agent`` eager and compiled, in a population.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
import yaml

import param_explore as pe

ivon_opt = pytest.importorskip("ivon", reason="ivon-opt is in the test extra")

SETTINGS = dict(lr=0.05, ess=50.0, hess_init=0.75, beta1=0.8, beta2=0.9, weight_decay=1e-3)


def make_net(seed: int = 0) -> torch.nn.Sequential:
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(3, 5), torch.nn.Tanh(), torch.nn.Linear(5, 2)
    ).double()


def loss(net: torch.nn.Module, step: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(100 + step)
    x = torch.randn(8, 3, generator=gen, dtype=torch.float64)
    y = torch.randn(8, 2, generator=gen, dtype=torch.float64)
    return (net(x) - y).square().sum()


def flat(tensors) -> torch.Tensor:
    return torch.cat([t.detach().flatten() for t in tensors])


@pytest.mark.parametrize("clip_radius", [None, 0.02], ids=["no-clip", "clip"])
@pytest.mark.parametrize("hess_approx", ["price", "gradsq"])
@pytest.mark.parametrize("hess_init", [0.75, None], ids=["h0", "h0=delta"])
def test_ivon_is_ivon_opt_step_by_step(hess_approx, clip_radius, hess_init):
    # hess_init None is h₀ = δ: ivon-opt is given δ itself.
    settings = {**SETTINGS, "hess_init": hess_init}
    ours_net, theirs_net = make_net(), make_net()
    ours = pe.make_optimizer(
        "ivon", ours_net, hess_approx=hess_approx, clip_radius=clip_radius, **settings
    )
    theirs = ivon_opt.IVON(
        theirs_net.parameters(), mc_samples=1, hess_approx=hess_approx,
        clip_radius=math.inf if clip_radius is None else clip_radius,
        **{**settings, "hess_init": hess_init or SETTINGS["weight_decay"]},
    )  # fmt: skip
    numel = sum(p.numel() for p in ours_net.parameters())
    clipped = 0
    for step in range(6):
        torch.manual_seed(1000 + step)  # ivon-opt's draw, made here first
        eps = torch.randn(numel, dtype=torch.float64)
        ours.resample_noise()
        offset = 0
        for p in ours_net.parameters():
            ours.state[p]["noise"].copy_(eps[offset : offset + p.numel()].view(p.shape))
            offset += p.numel()
        before = flat(ours_net.parameters())

        ours.zero_grad()
        with ours.training_params():
            loss(ours_net, step).backward()
        ours.step()

        theirs.zero_grad()
        torch.manual_seed(1000 + step)
        with theirs.sampled_params(train=True):
            loss(theirs_net, step).backward()
        theirs.step()

        group = theirs.param_groups[0]
        # h₀ = δ = 1e-3: h's correction divides by h + δ = 2e-3, and with 'gradsq' h reaches
        # 1e5-1e6, so float64 rounding of the two orders of operations grows to ~1e-7
        # relative there (measured 5e-7 at most); the other cases agree to 1e-12.
        tight = dict(rtol=1e-6 if hess_init is None else 1e-12, atol=1e-14)
        torch.testing.assert_close(
            flat(ours_net.parameters()), flat(theirs_net.parameters()), **tight
        )
        hess = flat(ours.state[p]["hess"] for p in ours_net.parameters())
        torch.testing.assert_close(hess, group["hess"], **tight)
        momentum = flat(ours.state[p]["exp_avg"] for p in ours_net.parameters())
        torch.testing.assert_close(momentum, group["momentum"], **tight)
        sigma = 1.0 / (group["ess"] * (group["hess"] + group["weight_decay"])).sqrt()
        torch.testing.assert_close(flat(ours.sampling_std()), sigma, **tight)
        radius = math.inf if clip_radius is None else clip_radius
        h0 = hess_init or SETTINGS["weight_decay"]
        bound = SETTINGS["lr"] * (h0 + SETTINGS["weight_decay"]) * radius
        moved = (flat(ours_net.parameters()) - before).abs()
        clipped += int((moved >= bound * (1 - 1e-9)).sum())
        assert bool((moved <= bound * (1 + 1e-9)).all())
    # With h₀ = δ, 'gradsq' makes h = ess·g² ~1e5 at once: no step reaches the radius.
    unreached = hess_init is None and hess_approx == "gradsq"
    assert (clipped > 0) == (clip_radius is not None and not unreached)  # the clip bit
    assert float(hess.std()) > 0  # h moved, differently per weight


def test_a_parameter_never_perturbed_keeps_its_curvature():
    """A LayerNorm's parameters (never perturbed, ε = 0) give Price's estimate no sample:
    their h stays h₀ while the perturbed weights' h moves; both means are trained."""
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.LayerNorm(4), torch.nn.Linear(4, 2)
    ).double()
    opt = pe.make_optimizer("ivon", net, beta2=0.5, ess=10.0, lr=0.1, hess_init=1.0)
    before = [p.detach().clone() for p in net.parameters()]
    for step in range(3):
        opt.resample_noise()
        opt.zero_grad()
        with opt.training_params():
            loss(net, step).backward()
        opt.step()
    for (name, p), old in zip(net.named_parameters(), before):
        hess = opt.state[p]["hess"]
        assert not torch.equal(p.detach(), old), name
        assert torch.equal(hess, torch.ones_like(hess)) == name.startswith("1."), name


def test_the_preset_s_numbers_by_hand():
    """The variational reading: h₀ = δ, so σ₀ = 1/√(2·ess·δ) and the prior's width
    1/√(ess·δ) — ess = 1e6, δ = 5e-5: σ₀ = 1/√100 = 0.1, width 1/√50 = 0.1414; δ = 5e-4:
    1/√1000 = 0.0316; δ = 5e-6: 1/√10 = 0.316. The first step is α(h₀ + δ)/(h₀ + δ) = α
    per unit of (m̂ + δμ): 0.01."""
    net = torch.nn.Linear(2, 2)
    opt = pe.make_optimizer("ivon", net)
    assert torch.allclose(opt.sampling_std()[0], torch.full((2, 2), 0.1), rtol=1e-6)
    assert opt._prior_variance(opt.param_groups[0]) == pytest.approx(0.02)  # 0.1414²
    assert float(opt.state[net.weight]["hess"][0, 0]) == pytest.approx(5e-5)
    for decay, sigma in ((5e-4, 0.031623), (5e-6, 0.316228)):
        std = pe.make_optimizer("ivon", net, weight_decay=decay).sampling_std()[0]
        assert float(std.mean()) == pytest.approx(sigma, rel=1e-5)
    # The first preset: σ₀ = 1/√(ess·(1 + 1e-4)): 0.1 at ess = 100.
    wide = pe.make_optimizer("ivon", net, ess=100.0, hess_init=1.0, weight_decay=1e-4)
    assert float(wide.sampling_std()[0].mean()) == pytest.approx(0.099995, rel=1e-5)


def test_the_preset_s_first_step_by_hand():
    """One weight, g = 3 at any θ, the preset's numbers (α = 0.01, ess = 1e6, δ = h₀ = 5e-5,
    β₁ = 0.9, β₂ = 0.99999): σ = 0.1, ĥ = (ε/σ)·g, h′ = β₂h₀ + (1 − β₂)ĥ +
    ½(1 − β₂)²(h₀ − ĥ)²/(h₀ + δ), m̂ = g, μ′ = μ − α(h₀ + δ)(m̂ + δμ)/(h′ + δ)."""
    net = torch.nn.Linear(1, 1, bias=False).double()
    with torch.no_grad():
        net.weight.fill_(0.5)
    opt = pe.make_optimizer("ivon", net)
    opt.resample_noise(torch.Generator().manual_seed(0))
    eps = float(opt.state[net.weight]["noise"])
    opt.zero_grad()
    with opt.training_params():
        net(torch.ones(1, 1, dtype=torch.float64)).sum().mul(3.0).backward()
    opt.step()
    d = h0 = 5e-5
    estimate = eps / 0.1 * 3.0
    h = 0.99999 * h0 + 1e-5 * estimate + 0.5 * 1e-10 * (h0 - estimate) ** 2 / (h0 + d)
    assert float(opt.state[net.weight]["hess"]) == pytest.approx(h, rel=1e-9)
    expected = 0.5 - 0.01 * (h0 + d) * (3.0 + d * 0.5) / (h + d)
    assert float(net.weight) == pytest.approx(expected, rel=1e-9)


def test_the_prior_bounds_sigma_only_while_h_is_not_negative():
    """IVON's correction keeps h + δ > 0, not h ≥ 0: its smallest h′ over all estimates ĥ is
    (h − δ)/2, so from 0 ≤ h < δ a negative Price estimate (negative curvature, as −Q has in
    most weights) takes h below 0 and σ = 1/√(ess (h + δ)) past the prior's width 1/√(ess δ).
    By hand, the preset's numbers from h = 0 (σ at the width, 0.1414) with ĥ = −1:
    h′ = 1e-5·(−1) + ½·1e-10·1/5e-5 = −9e-6, σ′ = 1/√(1e6·4.1e-5) = 0.156."""
    net = torch.nn.Linear(1, 1, bias=False).double()
    opt = pe.make_optimizer("ivon", net)
    opt.resample_noise(torch.Generator().manual_seed(0))
    opt.sampling_std()  # the state, made
    state = opt.state[net.weight]
    state["hess"].zero_()
    state["noise"].fill_(1.0)
    width = 1 / math.sqrt(1e6 * 5e-5)
    g = -1.0 / (1e6 * 5e-5 * width)  # ĥ = ess (h + δ) σ ε g = −1
    opt.zero_grad()
    with opt.training_params():
        (net.weight.sum() * g).backward()
    opt.step()
    h = float(state["hess"])
    assert h == pytest.approx(-1e-5 + 0.5 * 1e-10 / 5e-5, rel=1e-9)
    assert h + 5e-5 > 0
    assert float(opt.sampling_std()[0]) == pytest.approx(1 / math.sqrt(1e6 * (h + 5e-5)))
    assert float(opt.sampling_std()[0]) > width * 1.1


@pytest.mark.parametrize(
    "overrides, message",
    [
        (dict(hess_approx="fisher"), "hess_approx must be one of price, gradsq"),
        (dict(clip_radius=0.0), "clip_radius must be a finite number > 0 or null"),
        (dict(clip_radius=math.inf), "clip_radius must be a finite number > 0 or null"),
        (dict(ess=-1.0), "ess must be a finite number > 0"),
        (dict(beta2=1.0), r"beta2 must be in \[0, 1\)"),
        (dict(hess_init=0.0), "hess_init must be a finite number > 0"),
        (dict(hess_init=None, weight_decay=0.0), "hess_init null takes h0 = weight_decay"),
    ],
)
def test_bad_settings_are_one_message(overrides, message):
    with pytest.raises(ValueError, match=message):
        pe.make_optimizer("ivon", torch.nn.Linear(2, 2), **overrides)


def test_the_preset_restates_the_defaults():
    from agents.settings.files import load_yaml, preset_path

    preset = load_yaml(preset_path("ivon"))
    assert preset["optimizer_kwargs"] == pe.hyperparameters("ivon")
    text = preset_path("ivon").read_text()
    assert "0.032" in text and "ivon-opt" in text  # the other study value; the source
    assert preset["actor_grad_reduction"] == "mean"  # ess counts data: the loss is their mean


@pytest.mark.trains
def test_sb3_policy_trains_with_ivon():
    from stable_baselines3 import DDPG

    from agents.sb3.policy import ParamExplorePolicy

    model = DDPG(
        "ParamExplorePolicy", "Pendulum-v1", learning_starts=20, batch_size=16, seed=0,
        policy_kwargs=dict(strategy="ivon", net_arch=[16, 16]), device="cpu",
    )  # fmt: skip
    assert isinstance(model.policy, ParamExplorePolicy)
    before = [p.detach().clone() for p in model.policy.actor.parameters()]
    hess = [model.policy.actor.optimizer._init_state(g, p)["hess"].clone()
            for g in model.policy.actor.optimizer.param_groups for p in g["params"]]  # fmt: skip
    model.learn(60)
    after = list(model.policy.actor.parameters())
    assert not torch.equal(before[0], after[0])
    opt = model.policy.actor.optimizer
    moved = [opt.state[p]["hess"] for g in opt.param_groups for p in g["params"]]
    assert any(not torch.equal(a, b) for a, b in zip(hess, moved))


SHORT = ["--env", "Pendulum-v1", "--opt", "ivon", "--steps", "300", "--eval-every", "300",
         "--eval-episodes", "1", "--set", "hidden_sizes=[16,16]", "--set", "learning_starts=100",
         "--no-progress"]  # fmt: skip


@pytest.mark.trains
def test_train_agent_with_ivon_eager(tmp_path, train_agent):
    result = train_agent(*SHORT, "--no-compile", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    config = yaml.safe_load(
        (tmp_path / "runs" / "Pendulum-v1" / "ivon" / "seed0" / "config.yaml").read_text()
    )
    assert config["strategy"] == "ivon"
    assert config["optimizer_kwargs"]["ess"] == 1e6 and config["actor_grad_reduction"] == "mean"


def test_the_first_preset_is_a_config_layer_of_its_own():
    """configs/ivon-wide-prior.yaml over the preset (and over a study's protocol file) gives
    the IVON study's committed arms' settings back."""
    from agents.settings.resolve import resolve_settings

    configs = Path(__file__).resolve().parents[1] / "configs"
    run = resolve_settings(
        "ivon",
        [configs / "sparse-study.yaml", configs / "ivon-wide-prior.yaml"],
        ["optimizer_kwargs.ess=10"],
        env="SparseMountainCar-v0",
    )
    kwargs = run.learner.strategy.optimizer_kwargs
    assert kwargs == dict(lr=1e-4, ess=10.0, hess_init=1.0, beta1=0.9, beta2=0.9999,
                          weight_decay=1e-4, clip_radius=None, hess_approx="price")  # fmt: skip
    assert run.learner.actor_grad_reduction == "sum"
    assert list(run.learner.hidden_sizes) == [64, 64]  # the protocol file's layer stays


@pytest.mark.slow
@pytest.mark.trains
def test_train_agent_with_ivon_compiled(tmp_path, train_agent):
    result = train_agent(*SHORT, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "runs" / "Pendulum-v1" / "ivon" / "seed0" / "eval.csv").exists()


@pytest.mark.trains
def test_ivon_is_vimes_posterior_in_a_run(tmp_path, train_agent):
    """``--set bonus.posterior=ivon``: its VI settings, fits, information gains, the bonus."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    args = [*SHORT, "--no-compile", "--bonus", "vime", "--set", "bonus.posterior=ivon",
            "--set", "bonus.hidden_sizes=[8]", "--set", "bonus.num_samples=3",
            "--set", "bonus.min_pool_size=100", "--set", "bonus.fit_every=100",
            "--set", "log_every=100"]  # fmt: skip
    result = train_agent(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    run_dir = tmp_path / "runs" / "Pendulum-v1" / "ivon+vime-ivon" / "seed0"
    events = EventAccumulator(str(run_dir)).Reload()
    gains = [e.value for e in events.Scalars("bonus/info_gain_median")]
    assert gains and gains[-1] > 0
    state = torch.load(run_dir / "checkpoints" / "latest.pt", weights_only=True)
    group = state["bonus"]["dynamics"]["optimizer"]["param_groups"][0]
    num_data, prior_variance = 50.0, 0.25  # kl_batches · pool_batch_size; prior_std²
    assert group["ess"] == num_data
    assert group["weight_decay"] == pytest.approx(1 / (num_data * prior_variance))


@pytest.mark.parametrize(
    "task, tree, protocol, variant, sweep",
    [
        ("HalfCheetah-v4", "runs", [], "ess=1000", "optimizer_kwargs.ess=[100,1000]"),
        ("Hopper-v4", "runs", [], "ess=100", "optimizer_kwargs.ess=[100]"),
        ("SparseMountainCar-v0", "runs-episode", ["sparse-study.yaml"], "ess=10",
         "optimizer_kwargs.ess=[10,100]"),
    ],
)  # fmt: skip
def test_the_committed_ivon_arms_resolve_again_under_the_first_preset(
    task, tree, protocol, variant, sweep
):
    """studies/ivon/reproduce.sh's commands for the committed ivon@ess=* arms (the first
    preset as a --config layer) give each run's committed config.yaml back, value for value
    (and the keys added since at the values its file resolves to), so the grid skips or
    resumes them rather than refusing a changed run."""
    from agents.settings import RunSettings
    from agents.settings.resolve import resolve_runs

    root = Path(__file__).resolve().parents[1]
    configs = [root / "configs" / name for name in (*protocol, "ivon-wide-prior.yaml")]
    options = ["save_replay_buffer=true", sweep]
    if tree == "runs":
        options.append("buffer_size=100000")
    else:
        options.append("resample=episode")
    logdir = "runs" if tree == "runs" else "runs-episode"
    runs = resolve_runs(
        ["ivon"], [0], configs, options, env=task, total_steps=100_000, logdir=logdir, compile=True
    )
    (run,) = [r for r in runs if r.variant == variant]
    committed = root / "studies" / "ivon" / tree / task / f"ivon@{variant}" / "seed0"
    saved, values = yaml.safe_load((committed / "config.yaml").read_text()), run.values()
    assert {key: values[key] for key in saved} == saved  # every committed value
    # keys added since (a sampled critic's) resolve to the run's, as a resume reads them
    assert RunSettings.from_values(saved).values() == values


def test_ivon_trains_on_the_mean_loss_wherever_its_settings_leave_the_reduction_out():
    """The reduction is the strategy's own unless a setting names it: IVON's ess counts data
    points, so the Python API (``DDPG(env, strategy="ivon")``) trains on the minibatch's mean
    as ``--opt ivon`` does — not on a sum 64× larger at the preset's learning rate — and the
    other strategies on the released code's sum; a setting that names one keeps it."""
    from agents import DDPG
    from agents.settings import DDPGSettings, resolve_settings

    assert DDPGSettings.from_values({"strategy": "ivon"}).actor_grad_reduction == "mean"
    assert DDPGSettings().actor_grad_reduction == "sum"  # vadam, the default strategy
    named = DDPGSettings.from_values({"strategy": "ivon", "actor_grad_reduction": "sum"})
    assert named.actor_grad_reduction == "sum" and named.values()["actor_grad_reduction"] == "sum"
    assert DDPGSettings.from_values(named.values()) == named
    assert resolve_settings(strategy="ivon").learner.actor_grad_reduction == "mean"
    assert resolve_settings(strategy="fixed-noise").learner.actor_grad_reduction == "sum"
    agent = DDPG("Pendulum-v1", strategy="ivon", seed=0, hidden_sizes=[8, 8])
    assert agent.config.actor_grad_reduction == "mean"
    assert agent.config.values()["actor_grad_reduction"] == "mean"
