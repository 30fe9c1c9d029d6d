"""rl-zoo3 with ParamExplorePolicy: its ``train`` and its ``--optimize`` through
:mod:`agents.sb3.zoo`, whose sampler keeps the file's strategy and tunes σ₀.

The sampler is checked on real optuna trials, in a study whose user attributes are what
rl-zoo3 writes (``str()`` of each default hyperparameter); rl-zoo3 itself runs in a process
of its own, as a user runs it.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import gymnasium as gym
import optuna
import pytest
import torch
from stable_baselines3 import TD3
from torch import nn

import param_explore
from agents.common.action_noise import OrnsteinUhlenbeckActionNoise
from agents.common.errors import ConfigError
from agents.sb3.policy import ParamExploreCallback, ParamExplorePolicy

#: Importing rl_zoo3 (which agents.sb3.zoo does) replaces gymnasium's TimeLimit for the
#: whole process (rl_zoo3/gym_patches.py adds a "TimeLimit.truncated" info key). The suite
#: collects every module in each worker, so this module puts gymnasium's own class back
#: right after the import: no other test runs under rl-zoo3's patch. rl-zoo3 itself runs
#: in processes of its own here, with its patch, as a user runs it.
_TIME_LIMIT_SLOTS = [
    (gym.wrappers, "TimeLimit"),
    (gym.wrappers.common, "TimeLimit"),
    (gym.envs.registration, "TimeLimit"),
]
_time_limits = [getattr(module, name, None) for module, name in _TIME_LIMIT_SLOTS]
from agents.sb3.zoo import (  # noqa: E402
    SIGMA0_RANGE,
    STRATEGIES,
    sample_param_explore_params,
    sample_zoo_params,
    sigma0_setting,
)

for (_module, _name), _original in zip(_TIME_LIMIT_SLOTS, _time_limits):
    if _original is None:  # a name rl_zoo3 added
        delattr(_module, _name)
    else:
        setattr(_module, _name, _original)

REPO = Path(__file__).resolve().parents[1]
WEIGHT_NOISE = [s for s in STRATEGIES if param_explore.optimizer_class(s).explores]
ALL_WEIGHT_NOISE = [
    s for s in param_explore.available_optimizers() if param_explore.optimizer_class(s).explores
]


def zoo_trial(policy: str, policy_kwargs: dict, seed: int = 0) -> optuna.Trial:
    """A trial of a study that holds the file's defaults as rl-zoo3 stores them."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=seed))
    study.set_user_attr("policy", policy)
    study.set_user_attr("policy_kwargs", str(policy_kwargs))
    return study.ask()


# --- σ₀ onto each strategy's own setting ---------------------------------------------------


@pytest.mark.parametrize("strategy", ALL_WEIGHT_NOISE)
def test_sigma0_setting_starts_every_weight_at_sigma0(strategy):
    net = nn.Sequential(nn.Linear(3, 8), nn.Tanh(), nn.Linear(8, 2))
    optimizer = param_explore.make_optimizer(strategy, net, **sigma0_setting(strategy, 0.05, {}))
    stats = optimizer.exploration_statistics()
    assert stats["sigma_min"] == pytest.approx(0.05, rel=1e-6)
    assert stats["sigma_max"] == pytest.approx(0.05, rel=1e-6)


def test_sigma0_setting_values_by_hand():
    # Vadam: σ₀ = 1/√(λ + c), so c = 1/σ₀² − λ; with the file's λ = 1: 400 − 1.
    assert sigma0_setting("vadam", 0.05, {"prior_precision": 1.0}) == {
        "sample_constant": pytest.approx(399.0)
    }
    assert sigma0_setting("fixed-noise", 0.1, {}) == {"initial_precision": pytest.approx(100.0)}
    assert sigma0_setting("param-noise", 0.2, {}) == {"initial_std": 0.2}
    # IVON: σ₀ = 1/√(ess (h₀ + δ)): ess = 10, δ = 0.5, h₀ given, σ₀ = 0.1 → h₀ = 10 − 0.5;
    # the preset's h₀ = δ: σ₀ = 1/√(2 ess δ), ess = 1e6, σ₀ = 0.1 → δ = 1/(2e6 · 0.01).
    assert sigma0_setting("ivon", 0.1, {"ess": 10.0, "weight_decay": 0.5, "hess_init": 1.0}) == {
        "hess_init": pytest.approx(9.5)
    }
    assert sigma0_setting("ivon", 0.1, {}) == {"weight_decay": pytest.approx(5e-5)}
    assert sigma0_setting("adam-plain", 0.1, {}) == {}


# --- the sampler ----------------------------------------------------------------------------


def test_sampler_keeps_the_files_strategy_and_settings():
    fixed = {"strategy": "adam-explore", "actor_grad_scale": 4, "init": "khan2018"}
    trial = zoo_trial("ParamExplorePolicy", fixed)
    sampled = sample_zoo_params(trial, 1, 1, {"using_her_replay_buffer": False})
    kwargs = sampled["policy_kwargs"]
    assert trial.params["strategy"] == kwargs["strategy"] == "adam-explore"
    assert kwargs["actor_grad_scale"] == 4 and kwargs["init"] == "khan2018"
    sigma0 = trial.params["sigma0"]
    assert SIGMA0_RANGE[0] <= sigma0 <= SIGMA0_RANGE[1]
    assert kwargs["actor_optimizer_kwargs"]["initial_precision"] == pytest.approx(sigma0**-2)
    assert kwargs["actor_optimizer_kwargs"]["lr"] == trial.params["actor_learning_rate"]
    assert kwargs["resample"] == trial.params["resample"] in ("step", "episode")
    assert sampled["action_noise"] is None  # weight noise only, whatever the file said
    assert "noise_type" not in trial.params


def test_sampler_tunes_the_strategy_from_a_list_or_its_defaults():
    seen = set()
    for seed in range(12):
        trial = zoo_trial("ParamExplorePolicy", {"strategy": ["vadagrad", "noisy-adam"]}, seed)
        sampled = sample_zoo_params(trial, 1, 1, {})
        seen.add(sampled["policy_kwargs"]["strategy"])
    assert seen == {"vadagrad", "noisy-adam"}
    trial = zoo_trial("<class 'agents.sb3.policy.ParamExplorePolicy'>", {})  # a dotted name
    sample_zoo_params(trial, 1, 1, {})
    distribution = trial.distributions["strategy"]
    assert list(distribution.choices) == list(STRATEGIES)


def test_sampler_keeps_a_fixed_sigma0_and_resample():
    fixed = {
        "strategy": "vadam",
        "resample": "episode",
        "actor_optimizer_kwargs": {"sample_constant": 100.0, "lr": 3e-4},
    }
    trial = zoo_trial("ParamExplorePolicy", fixed)
    kwargs = sample_zoo_params(trial, 1, 1, {})["policy_kwargs"]
    assert kwargs["resample"] == "episode"
    assert kwargs["actor_optimizer_kwargs"] == {"sample_constant": 100.0, "lr": 3e-4}
    assert not {"sigma0", "resample", "actor_learning_rate"} & trial.params.keys()


def test_sampler_gives_action_noise_to_a_strategy_without_weight_noise():
    trial = optuna.trial.FixedTrial(
        {
            "strategy": "adam-plain", "actor_learning_rate": 1e-4, "net_arch": "small",
            "noise_type": "ornstein-uhlenbeck", "noise_std": 0.3, "train_freq": 2,
            "one_minus_gamma": 0.01, "batch_size_pow": 6, "learning_rate": 1e-3, "tau": 0.005,
        }
    )  # fmt: skip
    sampled = sample_param_explore_params(trial, 2, {"strategy": "adam-plain"})
    noise = sampled["action_noise"]
    assert isinstance(noise, OrnsteinUhlenbeckActionNoise)
    assert (noise.sigma, noise.dt, noise.action_dim) == (0.3, 1.0, 2)
    assert sampled["policy_kwargs"] == {
        "net_arch": [64, 64], "strategy": "adam-plain", "actor_optimizer_kwargs": {"lr": 1e-4}
    }  # fmt: skip
    assert (sampled["gamma"], sampled["batch_size"]) == (pytest.approx(0.99), 64)
    assert sampled["train_freq"] == sampled["gradient_steps"] == 2


def test_other_policies_keep_rl_zoo3s_own_sampler():
    trial = zoo_trial("MlpPolicy", {})
    sampled = sample_zoo_params(trial, 1, 1, {"using_her_replay_buffer": False})
    assert "strategy" not in trial.params and "noise_type" in trial.params
    assert sampled["policy_kwargs"].keys() == {"net_arch"}


def test_sampler_refuses_unknown_strategies_and_non_literal_policy_kwargs():
    with pytest.raises(ConfigError, match=r"strategy must be .* got \['vadam', 'vadamm'\]"):
        sample_zoo_params(
            zoo_trial("ParamExplorePolicy", {"strategy": ["vadam", "vadamm"]}), 1, 1, {}
        )
    study = optuna.create_study()
    study.set_user_attr("policy", "ParamExplorePolicy")
    study.set_user_attr("policy_kwargs", str({"activation_fn": nn.ReLU}))
    with pytest.raises(ConfigError, match="must be literals"):
        sample_zoo_params(study.ask(), 1, 1, {})


# --- warnings of the policy ----------------------------------------------------------------


def test_policy_without_a_strategy_warns_naming_the_default():
    with pytest.warns(
        UserWarning, match="no strategy in policy_kwargs: training the default 'vadam'"
    ):
        model = TD3("ParamExplorePolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=[8]))
    assert isinstance(model.policy.actor.optimizer, param_explore.Vadam)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*no strategy")
        TD3(ParamExplorePolicy, "Pendulum-v1", policy_kwargs=dict(strategy="vadam", net_arch=[8]))


def test_a_model_trained_without_a_strategy_loads_without_warning_again(tmp_path):
    """Built without a strategy it warns once; trained with ParamExploreCallback, it is
    saved with the strategy it trained, and loads as that strategy without a warning."""
    given = dict(net_arch=[8])
    with pytest.warns(UserWarning, match="no strategy"):
        model = TD3("ParamExplorePolicy", "Pendulum-v1", learning_starts=5, policy_kwargs=given)
    model.learn(10, callback=ParamExploreCallback())
    assert given == dict(net_arch=[8])  # the caller's dict untouched
    model.save(tmp_path / "model.zip")
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message=".*no strategy")
        loaded = TD3.load(tmp_path / "model.zip", env=gym.make("Pendulum-v1"), device="cpu")
    assert loaded.policy.strategy == "vadam"
    assert isinstance(loaded.policy.actor.optimizer, param_explore.Vadam)


@pytest.mark.parametrize("strategy, warns", [("fixed-noise", True), ("adam-plain", False)])
def test_weight_noise_with_action_noise_warns(strategy, warns):
    model = TD3(
        "ParamExplorePolicy", "Pendulum-v1", learning_starts=10,
        policy_kwargs=dict(strategy=strategy, net_arch=[8]),
        action_noise=OrnsteinUhlenbeckActionNoise(1),
    )  # fmt: skip
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.learn(2, callback=ParamExploreCallback())
    said = [str(w.message) for w in caught if "action noise" in str(w.message)]
    assert len(said) == int(warns), said
    if warns:
        assert said[0].startswith("'fixed-noise' explores with weight noise")


# --- rl-zoo3 itself -------------------------------------------------------------------------


def zoo_train(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "rl_zoo3.train", "--env", "Pendulum-v1", "--seed", "0",
         "-f", "logs", *args],
        cwd=cwd, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def test_documented_hyperparameter_files_are_the_examples():
    """docs/sb3.md shows the shipped files whole (its commands run them:
    tests/test_documented_commands.py)."""
    docs = (REPO / "docs" / "sb3.md").read_text()
    tuning, training = (
        (REPO / "examples" / "rl_zoo" / f).read_text() for f in ("td3.yml", "ddpg.yml")
    )
    assert tuning in docs and training in docs
    assert "strategy=['vadam', 'fixed-noise', 'param-noise']" in tuning


def test_rl_zoo3_optimize_trains_each_trials_sampled_strategy(tmp_path):
    """Two trials of rl-zoo3's ``--optimize``: their params hold strategy and σ₀, and each
    trial's saved model is that strategy at that σ₀, without action noise."""
    (tmp_path / "tune.yml").write_text(
        textwrap.dedent("""
        Pendulum-v1:
          n_timesteps: 20000
          policy: 'ParamExplorePolicy'
          learning_starts: 200
          noise_type: 'normal'
          noise_std: 0.5
          policy_kwargs: "dict(strategy=['fixed-noise', 'param-noise'], net_arch=[16, 16],
            actor_grad_scale=4)"
        """)
    )  # a file's action noise is dropped for weight-noise strategies
    result = zoo_train(
        "--algo", "td3", "-conf", "tune.yml", "--gym-packages", "agents.sb3.zoo", "-optimize",
        "--n-trials", "2", "--n-timesteps", "300", "--n-jobs", "1", "--sampler", "random",
        "--pruner", "none", "--eval-episodes", "1", "--no-optim-plots",
        "--optimization-log-path", "trials", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no strategy" not in result.stderr
    report = next((tmp_path / "logs" / "td3").glob("report_Pendulum-v1_2-trials-300-*.csv"))
    trials = list(csv.DictReader(report.open()))
    assert len(trials) == 2
    for row in trials:
        strategy, sigma0 = row["params_strategy"], float(row["params_sigma0"])
        assert strategy in ("fixed-noise", "param-noise")
        model = TD3.load(
            tmp_path / "trials" / f"trial_{row['number']}" / "best_model.zip",
            env=gym.make("Pendulum-v1"), device="cpu",
        )  # fmt: skip
        policy = model.policy
        assert (policy.strategy, policy.resample) == (strategy, row["params_resample"])
        assert policy.actor_grad_scale == 4 and model.action_noise is None
        assert model.batch_size == 2 ** int(row["params_batch_size_pow"])
        optimizer = policy.actor.optimizer
        assert isinstance(optimizer, param_explore.optimizer_class(strategy))
        if strategy == "fixed-noise":  # σ never learned: the trained model still has σ₀
            stds = torch.cat([s.flatten() for s in optimizer.sampling_std()])
            assert torch.allclose(stds, torch.tensor(sigma0), rtol=1e-5)
        else:  # adapted from σ₀ = initial_std
            assert policy.actor_optimizer_kwargs["initial_std"] == pytest.approx(sigma0)
        assert math.isclose(
            optimizer.param_groups[0]["lr"], float(row["params_actor_learning_rate"])
        )


def test_rl_zoo3_train_without_a_strategy_says_which_it_trains(tmp_path):
    (tmp_path / "td3.yml").write_text(
        textwrap.dedent("""
        Pendulum-v1:
          n_timesteps: 100
          policy: 'ParamExplorePolicy'
          learning_starts: 50
          policy_kwargs: "dict(net_arch=[16, 16])"
        """)
    )
    result = zoo_train(
        "--algo", "td3", "-conf", "td3.yml", "--gym-packages", "agents.sb3.zoo",
        "--eval-freq", "-1", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    assert "no strategy in policy_kwargs: training the default 'vadam'" in result.stderr
    saved = next((tmp_path / "logs" / "td3").glob("Pendulum-v1_*/Pendulum-v1.zip"))
    with pytest.warns(UserWarning, match="no strategy"):  # SB3 saved the kwargs as given
        model = TD3.load(saved, env=gym.make("Pendulum-v1"), device="cpu")
    assert isinstance(model.policy.actor.optimizer, param_explore.Vadam)


def test_rl_zoo3_reloads_a_tuned_trial_as_it_trained(tmp_path):
    """``--storage … --trial-id N`` trains with trial N's hyperparameters: its strategy at
    its σ₀ with its resample and actor learning rate, the study's policy_kwargs kept (which
    rl-zoo3's TD3 converter does not know: they reached TD3 as unknown arguments), and the
    critic's values as rl-zoo3 converts them. The study is one rl-zoo3 would write (its
    user attributes) and its trials this sampler's; rl-zoo3 reloads it in a process."""
    policy_kwargs = dict(strategy=["fixed-noise", "adam-plain"], net_arch=[16, 16],
                         actor_grad_scale=4)  # fmt: skip
    (tmp_path / "td3.yml").write_text(
        "Pendulum-v1:\n  n_timesteps: 20000\n  policy: 'ParamExplorePolicy'\n"
        f'  learning_starts: 50\n  policy_kwargs: "{policy_kwargs}"\n'
    )
    storage = optuna.storages.JournalStorage(
        optuna.storages.journal.JournalFileBackend(str(tmp_path / "study.log"))
    )
    study = optuna.create_study(storage=storage, study_name="tune",
                                sampler=optuna.samplers.RandomSampler(seed=0))  # fmt: skip
    study.set_user_attr("policy", "ParamExplorePolicy")
    study.set_user_attr("policy_kwargs", str(policy_kwargs))
    while not any(t.number > 0 and t.params["strategy"] == "fixed-noise" for t in study.trials):
        trial = study.ask()
        sample_zoo_params(trial, 1, 1, {})
        study.tell(trial, -1000.0)
    # rl-zoo3 reads --trial-id 0 as no trial id at all (``if self.trial_id``)
    chosen = next(t for t in study.trials if t.number > 0 and t.params["strategy"] == "fixed-noise")
    params = chosen.params
    result = zoo_train(
        "--algo", "td3", "-conf", "td3.yml", "--gym-packages", "agents.sb3.zoo",
        "--storage", "study.log", "--study-name", "tune", "--trial-id", str(chosen.number),
        "-n", "100", "--eval-freq", "-1", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    saved = next((tmp_path / "logs" / "td3").glob("Pendulum-v1_*/Pendulum-v1.zip"))
    model = TD3.load(saved, env=gym.make("Pendulum-v1"), device="cpu")
    policy = model.policy
    assert (policy.strategy, policy.resample) == ("fixed-noise", params["resample"])
    assert policy.actor_grad_scale == 4 and model.action_noise is None
    assert [m.out_features for m in policy.actor.mu if isinstance(m, nn.Linear)] == [16, 16, 1]
    optimizer = policy.actor.optimizer
    stds = torch.cat([s.flatten() for s in optimizer.sampling_std()])
    assert torch.allclose(stds, torch.tensor(params["sigma0"]), rtol=1e-5)  # σ never learned
    assert math.isclose(optimizer.param_groups[0]["lr"], params["actor_learning_rate"])
    assert model.batch_size == 2 ** params["batch_size_pow"]
    assert model.gamma == pytest.approx(1 - params["one_minus_gamma"])
    assert model.gradient_steps == params["train_freq"]


# --- refusals (fault round 6) ----------------------------------------------------------------
REFUSED = {
    "empty list": ("dict(strategy=[])", "got []"),
    "unknown name": ("dict(strategy=['vadamx'])", "got ['vadamx']"),
    "not a list": ("dict(strategy=3)", "got 3"),
    "not literal": ("dict(strategy='vadam', activation_fn=nn.ReLU)", "must be literals"),
    "vadam prior": (
        "dict(strategy='vadam', actor_optimizer_kwargs=dict(prior_precision=1e6))",
        "sigma0 = 0.01, an end of the tuned range 0.01-0.32, is out of reach for vadam with "
        "actor_optimizer_kwargs {'prior_precision': 1000000.0}: it would need sample_constant "
        "= -990000",
    ),
    "ivon prior": (
        "dict(strategy='ivon', actor_optimizer_kwargs=dict(weight_decay=1e3))",
        "is out of reach for ivon with actor_optimizer_kwargs {'weight_decay': 1000.0}: it "
        "would need hess_init = -999.99",
    ),
    "bad setting": (
        "dict(strategy='vadam', actor_optimizer_kwargs=dict(lr=-1))",
        "policy_kwargs actor_optimizer_kwargs for vadam: lr must be a finite number > 0",
    ),
}


def test_r6_6_the_sampler_refuses_an_empty_list_and_an_unreachable_sigma0():
    """``strategy=[]`` tuned the default list (``… or STRATEGIES`` swallowed it)."""
    for policy_kwargs in ({"strategy": []}, {"strategy": ["vadam"], "actor_optimizer_kwargs":
                                                {"prior_precision": 20.0}}):  # fmt: skip
        with pytest.raises(ConfigError, match=r"got \[\]|sigma0 = 0.32, an end"):
            sample_zoo_params(zoo_trial("ParamExplorePolicy", policy_kwargs), 1, 1, {})


@pytest.mark.parametrize("case", list(REFUSED))
def test_r6_6_rl_zoo3_optimize_refuses_in_one_line(tmp_path, case):
    """Each ended in optuna's "Trial 0 failed" traceback and the re-raise (61-76 lines),
    or, an empty list, tuned the default strategies."""
    policy_kwargs, message = REFUSED[case]
    (tmp_path / "tune.yml").write_text(
        "Pendulum-v1:\n  n_timesteps: 300\n  policy: 'ParamExplorePolicy'\n"
        f'  policy_kwargs: "{policy_kwargs}"\n'
    )
    result = zoo_train(
        "--algo", "td3", "-conf", "tune.yml", "--gym-packages", "agents.sb3.zoo", "-optimize",
        "--n-trials", "1", "--n-timesteps", "300", "--n-jobs", "1", "--sampler", "random",
        "--pruner", "none", "--eval-episodes", "1", "--no-optim-plots", cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 2, result.stderr[-3000:]
    assert "Traceback" not in result.stderr and "failed" not in result.stderr, result.stderr
    lines = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(lines) == 1 and lines[0].startswith("rl_zoo3 -optimize: error: "), lines
    assert message in lines[0], lines[0]
