"""VIME's bonus (agents.curiosity): settings, pool, batching, normalisation, behaviour, SB3.

The mathematics of each posterior's information gain is tested in test_information_gain.py;
here: the batched per-example statistics against autograd one example at a time, batched
information gains against one transition at a time and a call in chunks against one pass, a
transition the model predicts well against a novel one (several seeds, a margin), for every
posterior and both of bbb's noises, VIME's median normalisation by hand, and the two SB3 forms
on real algorithms (sb3-contrib's TRPO, whose model gets the raw action sample, SB3's DDPG).
"""

from __future__ import annotations

import signal

import numpy as np
import pytest
import torch
from sb3_contrib import TRPO
from stable_baselines3 import DDPG
from stable_baselines3.common.buffers import ReplayBuffer
from stable_baselines3.common.callbacks import BaseCallback, CallbackList

from agents.common.errors import ConfigError
from agents.common.stop_requests import forget_stop_request, request_stop
from agents.curiosity import POSTERIORS, VimeBonus, VimeConfig, resolve_bonus
from agents.curiosity.dynamics import gaussian_nll
from agents.curiosity.pool import TransitionPool
from agents.curiosity.sb3 import VimeCallback, VimeReplayBuffer
from agents.curiosity.vime import CHUNK, MedianNormaliser

OBS, ACT = 3, 2
#: A small model and schedule so that tests run in seconds.
SMALL = dict(hidden_sizes=[8], num_samples=3, pool_size=2000, min_pool_size=100, fit_every=200)


def small(posterior: str, **overrides) -> VimeConfig:
    lr = {"lr": 3e-3} if posterior == "bbb" else {}  # released 1e-4: too slow for a test
    return resolve_bonus({"kind": "vime", "posterior": posterior, **SMALL, **lr, **overrides})


def system(rng, n, surprise=0.0):
    """s′ = s + 0.1·[a, a₀]: what the model learns; ``surprise`` shifts s′ off it."""
    s = rng.normal(size=(n, OBS)).astype(np.float32)
    a = rng.uniform(-1, 1, size=(n, ACT)).astype(np.float32)
    return s, a, (s + 0.1 * np.concatenate([a, a[:, :1]], 1) + surprise).astype(np.float32)


# --------------------------------------------------------------------------- settings
def test_settings_default_to_the_released_code_and_validate():
    config = resolve_bonus({"kind": "vime"})
    assert (config.posterior, config.eta, config.hidden_sizes) == ("bbb", 1e-4, [32])
    assert (config.num_samples, config.bbb_gain_noise) == (10, "unit")  # the released estimator
    assert (config.num_data, config.likelihood_std, config.prior_std) == (50, 5.0, 0.5)
    assert resolve_bonus(None) is None and resolve_bonus({"kind": "none"}) is None
    assert resolve_bonus({"kind": "vime", "eta": "1e-3"}).eta == 1e-3  # YAML 1.1 strings


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"kind": "vim"}, r"unknown bonus kind vim \(did you mean vime\?\); valid: vime"),
        ({"kind": "vime", "posterior": "kfac"}, r"bonus\.posterior must be one of bbb, noisy-adam"),
        ({"kind": "vime", "etta": 1}, r"unknown bonus setting\(s\) etta \(did you mean eta\?\)"),
        ({"kind": "vime", "eta": -1}, r"bonus\.eta must be >= 0, got -1"),
        ({"kind": "vime", "num_samples": 0}, r"bonus\.num_samples must be an integer >= 1"),
        ({"kind": "vime", "num_samples": 2.5}, r"bonus\.num_samples must be an integer"),
        (
            {"kind": "vime", "bbb_gain_noise": "layer"},
            r"bonus\.bbb_gain_noise must be one of unit, weight, got 'layer'",
        ),
        ({"kind": "vime", "min_pool_size": 10, "pool_size": 5}, "exceeds bonus.pool_size"),
        ({"kind": "vime", "hidden_sizes": []}, "at least one positive size"),
        ({"posterior": "bbb"}, "without a kind"),
        (
            {"kind": "vime", "posterior": "noisy-kfac", "optimizer_kwargs": {"betas": 1}},
            r"bonus: unknown hyperparameter\(s\) for optimizer 'NoisyKFAC': betas "
            r"\(did you mean beta\?\); valid: lr, beta",
        ),
        (
            {"kind": "vime", "optimizer_kwargs": {"lr": -1}},
            r"bonus: lr must be a finite number > 0",
        ),
        ("vime", "bonus must be a mapping"),
    ],
)
def test_bad_settings_get_one_clear_line(settings, message):
    with pytest.raises(ConfigError, match=message):
        resolve_bonus(settings)


# --------------------------------------------------------------------------- pool, median
def test_pool_is_a_fifo_of_transitions_with_population_moments():
    pool = TransitionPool(5, 2, 1)
    rows = torch.arange(14, dtype=torch.float32).reshape(7, 2)
    pool.extend(rows[:3], rows[:3, :1], rows[:3] + 100)
    pool.extend(rows[3:7], rows[3:7, :1], rows[3:7] + 100)  # wraps: rows 2-6 remain
    assert len(pool) == 5 and pool.position == 2
    assert sorted(pool.obs[:, 0].tolist()) == [4.0, 6.0, 8.0, 10.0, 12.0]
    torch.testing.assert_close(pool.next_obs, pool.obs + 100)
    mean, std, _, _ = pool.moments()
    torch.testing.assert_close(mean, torch.tensor([8.0, 9.0]))
    torch.testing.assert_close(std, torch.full((2,), float(np.std([4, 6, 8, 10, 12]))))


def test_median_normaliser_divides_by_the_mean_of_the_last_medians():
    normalise = MedianNormaliser(window=2)
    torch.testing.assert_close(
        normalise(torch.tensor([1.0, 2.0, 3.0])), torch.tensor([0.5, 1, 1.5])
    )
    # medians 2 and 5 (numpy's: the mean of the two middle values) → divide by 3.5
    torch.testing.assert_close(
        normalise(torch.tensor([4.0, 6.0, 1.0, 9.0])), torch.tensor([4.0, 6, 1, 9]) / 3.5
    )
    # window 2: the first median (2) is gone; medians 5 and 7 → 6
    torch.testing.assert_close(normalise(torch.tensor([7.0])), torch.tensor([7.0 / 6]))
    assert normalise(torch.zeros(3)).eq(0).all()  # no division by a zero median


# --------------------------------------------------------------------------- batching
#: Every information gain: the four posteriors, bbb with either noise.
VARIANTS = {
    "bbb": ("bbb", {}),
    "bbb-weight": ("bbb", {"bbb_gain_noise": "weight"}),
    "noisy-adam": ("noisy-adam", {}),
    "noisy-kfac": ("noisy-kfac", {}),
    "ivon": ("ivon", {}),
}


def fitted(posterior: str, seed: int = 0, fits: int = 2, **overrides) -> VimeBonus:
    rng = np.random.default_rng(seed)
    bonus = VimeBonus(small(posterior, updates_per_step=0.5, **overrides), OBS, ACT, seed=seed)
    for _ in range(fits):
        bonus.add(*system(rng, 400))
        assert bonus.fit()
    return bonus


def test_example_statistics_are_each_examples_own_gradients():
    """One backward pass of the summed loss over K samples × B examples gives every
    example's layer gradients at every sample (autograd on each alone)."""
    bonus = fitted("noisy-adam", fits=1)
    dynamics = bonus.dynamics
    rng = np.random.default_rng(1)
    s, a, s2 = (torch.as_tensor(v) for v in system(rng, 5))
    inputs, targets = bonus._normalised(s, a, s2)
    thetas = dynamics.optimizer.posterior_sample(dynamics.draw_noise(3))
    stats = dynamics.example_statistics(thetas, inputs, targets)
    dense = dynamics.dense_gradients(stats)
    for k in range(3):
        for b in range(5):
            params = [t[k].clone().requires_grad_() for t in thetas]
            hidden = torch.relu(inputs[b] @ params[0].T + params[1])
            loss = gaussian_nll(hidden @ params[2].T + params[3], targets[b], 5.0)
            grads = torch.autograd.grad(loss, params)
            torch.testing.assert_close(stats.nll[b, k], loss.detach())
            for got, want in zip(dense, grads):
                torch.testing.assert_close(got[b, k], want, rtol=1e-5, atol=1e-6)


def test_the_posteriors_cover_every_variant():
    assert sorted({posterior for posterior, _ in VARIANTS.values()}) == sorted(POSTERIORS)


@pytest.mark.parametrize("variant", VARIANTS)
def test_batched_information_gain_equals_one_transition_at_a_time(variant):
    """Each transition alone, with its part of the batch's noise (its own rows of noise
    per unit; all of a shared noise)."""
    posterior, overrides = VARIANTS[variant]
    bonus = fitted(posterior, **overrides)
    dynamics = bonus.dynamics
    batch = (torch.as_tensor(v) for v in system(np.random.default_rng(3), 7, surprise=0.5))
    inputs, targets = bonus._normalised(*batch)
    noises = dynamics.information_noise(7)
    together = dynamics.information_gain(inputs, targets, noises)
    alone = [
        dynamics.information_gain(
            inputs[i : i + 1], targets[i : i + 1], dynamics.noise_rows(noises, slice(i, i + 1))
        )
        for i in range(7)
    ]
    torch.testing.assert_close(together, torch.cat(alone), rtol=1e-5, atol=0)
    assert together.min() > 0 and together.std() > 0


@pytest.mark.parametrize("variant", ["bbb", "bbb-weight"])
def test_a_call_in_chunks_equals_one_pass(variant):
    """More transitions than one chunk: the call's noise, drawn once, is split by rows."""
    posterior, overrides = VARIANTS[variant]
    bonus = fitted(posterior, **overrides)
    batch = system(np.random.default_rng(5), CHUNK + 9, surprise=0.5)
    bonus.generator.manual_seed(13)
    chunked = bonus.information_gain(*batch)
    bonus.generator.manual_seed(13)
    inputs, targets = bonus._normalised(*(torch.as_tensor(v) for v in batch))
    noises = bonus.dynamics.information_noise(CHUNK + 9)
    whole = bonus.dynamics.information_gain(inputs, targets, noises)
    torch.testing.assert_close(chunked, whole, rtol=1e-5, atol=0)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_transition_the_model_predicts_gets_less_than_a_novel_one(variant):
    """Median information gain of 40 transitions of the learnt system against 40 whose s′
    is off by 3 (in units of the normalised state): at least twice as large, every seed."""
    posterior, overrides = VARIANTS[variant]
    for seed in range(3):
        bonus = fitted(posterior, seed=seed, fits=3, **overrides)
        rng = np.random.default_rng(100 + seed)
        familiar = bonus.information_gain(*system(rng, 40)).median()
        novel = bonus.information_gain(*system(rng, 40, surprise=3.0)).median()
        assert novel > 2 * familiar, (seed, float(familiar), float(novel))


def test_a_stop_request_ends_a_fit_between_its_updates(monkeypatch):
    """A fit of many updates (a long time on a large pool) stops at the next update once a
    stop is requested, logs the updates it ran, and a stop before the first is no fit."""
    bonus = VimeBonus(small("bbb", updates_per_step=5.0), OBS, ACT, seed=0)
    bonus.add(*system(np.random.default_rng(0), 200))  # due: 1000 updates
    calls = []
    train_step = bonus.dynamics.train_step

    def counted(*batch):
        calls.append(1)
        if len(calls) == 3:
            request_stop(signal.SIGINT)
        return train_step(*batch)

    monkeypatch.setattr(bonus.dynamics, "train_step", counted)
    try:
        assert bonus.fit()
        assert len(calls) == 3 and bonus.pop_statistics()["dynamics/updates"] == 3.0
        bonus.add(*system(np.random.default_rng(1), 10))
        assert not bonus.fit() and len(calls) == 3  # stopped: no update, no fit
    finally:
        forget_stop_request()


def test_bonus_is_zero_until_the_first_fit_then_normalised_and_logged():
    bonus = VimeBonus(small("noisy-kfac", eta=0.5), OBS, ACT, seed=0)
    rng = np.random.default_rng(0)
    bonus.add(*system(rng, 50))
    assert not bonus.fit()  # the pool holds fewer than min_pool_size
    assert bonus.intrinsic_rewards(*system(rng, 8)).eq(0).all()
    bonus.add(*system(rng, 150))
    assert bonus.fit()
    batch = system(rng, 9)
    bonus.generator.manual_seed(5)
    gains = bonus.information_gain(*batch)
    bonus.generator.manual_seed(5)
    rewards = bonus.intrinsic_rewards(*batch)
    torch.testing.assert_close(rewards, (0.5 * gains / gains.median()).float())
    stats = bonus.pop_statistics()
    assert stats["bonus/intrinsic_mean"] == pytest.approx(float(rewards.mean()))
    assert stats["bonus/info_gain_median"] == pytest.approx(float(gains.median()))
    assert stats["dynamics/updates"] == round(0.1 * 200)
    assert stats["dynamics/loss"] == pytest.approx(
        stats["dynamics/nll"] + stats["dynamics/kl"] / 50
    )
    assert bonus.pop_statistics() == {}


def test_a_broken_model_gives_no_bonus_and_says_so():
    bonus = fitted("noisy-adam", fits=1)
    with torch.no_grad():
        bonus.dynamics.network[0].weight[0, 0] = float("nan")
    rewards = bonus.intrinsic_rewards(*system(np.random.default_rng(2), 6))
    assert rewards.eq(0).all()
    assert bonus.pop_statistics()["bonus/non_finite_gains"] == 6


def test_the_bonus_draws_only_from_its_own_generator():
    """Building and training it leaves the global RNG (the agent's initialisation) alone."""
    state = torch.get_rng_state()
    fitted("noisy-kfac", fits=1)
    assert torch.equal(torch.get_rng_state(), state)


def test_state_dict_round_trip_continues_identically():
    bonus = fitted("noisy-kfac", fits=1)
    state = bonus.state_dict()
    twin = VimeBonus(small("noisy-kfac", updates_per_step=0.5), OBS, ACT, seed=99)
    twin.load_state_dict(state)
    batch = system(np.random.default_rng(4), 5)
    torch.testing.assert_close(twin.information_gain(*batch), bonus.information_gain(*batch))


# --------------------------------------------------------------------------- SB3
class RolloutRecorder(BaseCallback):
    """Keeps each step's extrinsic rewards, and the rollout buffer as the bonus left it."""

    def _on_rollout_start(self) -> None:
        self.rewards = []

    def _on_step(self) -> bool:
        self.rewards.append(np.array(self.locals["rewards"], copy=True))
        return True

    def _on_rollout_end(self) -> None:
        buffer = self.model.rollout_buffer
        self.final = {
            "rewards": buffer.rewards.copy(),
            "values": buffer.values.copy(),
            "starts": buffer.episode_starts.copy(),
            "advantages": buffer.advantages.copy(),
            "last_value": self.locals["values"].numpy().ravel(),
            "done": np.asarray(self.locals["dones"], dtype=np.float32),
        }
        self.logged = dict(self.logger.name_to_value)


def gae(rewards, values, starts, last_value, done, gamma, lam):
    advantages = np.zeros_like(rewards)
    last = 0.0
    for t in reversed(range(len(rewards))):
        if t == len(rewards) - 1:
            next_value, non_terminal = last_value, 1.0 - done
        else:
            next_value, non_terminal = values[t + 1], 1.0 - starts[t + 1]
        delta = rewards[t] + gamma * next_value * non_terminal - values[t]
        last = delta + gamma * lam * non_terminal * last
        advantages[t] = last
    return advantages


def test_trpo_with_vime_callback_adds_the_bonus_and_recomputes_advantages():
    """sb3-contrib's TRPO, unmodified: the rollout's rewards carry η · normalised gain from
    the second rollout on (the model is fitted after the first), and the advantages are
    GAE of those rewards. No time limit within 3 × 128 steps (MountainCarContinuous)."""
    model = TRPO(
        "MlpPolicy", "MountainCarContinuous-v0", n_steps=128, batch_size=64, seed=0,
        policy_kwargs=dict(net_arch=[8]),
    )  # fmt: skip
    recorder = RolloutRecorder()
    vime = VimeCallback(dict(SMALL, posterior="noisy-kfac", eta=0.1), seed=0)
    model.learn(3 * 128, callback=CallbackList([vime, recorder]))  # the recorder sees after
    final = recorder.final
    bonus = final["rewards"] - np.stack(recorder.rewards)
    assert bonus.shape == (128, 1) and (bonus > 0).all()
    expected = gae(
        final["rewards"][:, 0], final["values"][:, 0], final["starts"][:, 0],
        final["last_value"][0], final["done"][0], model.gamma, model.gae_lambda,
    )  # fmt: skip
    np.testing.assert_allclose(final["advantages"][:, 0], expected, rtol=1e-5, atol=1e-6)
    assert vime.bonus.num_fits == 3 and len(vime.bonus.pool) == 3 * 128
    assert recorder.logged["bonus/intrinsic_mean"] == pytest.approx(bonus.mean(), rel=1e-5)
    assert {"bonus/info_gain_median", "dynamics/loss", "dynamics/kl"} <= set(recorder.logged)


class ActionRecorder(BaseCallback):
    """Each step's raw action sample and the action the environment was given."""

    def _init_callback(self) -> None:
        self.raw, self.clipped = [], []

    def _on_step(self) -> bool:
        self.raw.append(np.array(self.locals["actions"], copy=True))
        self.clipped.append(np.array(self.locals["clipped_actions"], copy=True))
        return True


def test_on_policy_dynamics_model_gets_the_raw_action_sample():
    """As rllab stores it: the Gaussian policy's sample (σ = 1 at first, so that some fall
    outside MountainCarContinuous's [−1, 1]), not the action clipped for the env."""
    model = TRPO(
        "MlpPolicy", "MountainCarContinuous-v0", n_steps=64, batch_size=64, seed=0,
        policy_kwargs=dict(net_arch=[8]),
    )  # fmt: skip
    recorder = ActionRecorder()
    vime = VimeCallback(dict(SMALL, min_pool_size=50), seed=0)
    model.learn(2 * 64, callback=CallbackList([vime, recorder]))
    raw, clipped = (np.concatenate(x).reshape(-1, 1) for x in (recorder.raw, recorder.clipped))
    assert len(raw) == len(vime.bonus.pool) == 128
    assert (np.abs(raw) > 1).any() and not np.array_equal(raw, clipped)
    np.testing.assert_array_equal(vime.bonus.pool.actions[:128].numpy(), raw.astype(np.float32))
    rollout = model.rollout_buffer.actions.reshape(-1, 1)  # the last rollout, as TRPO stores it
    np.testing.assert_array_equal(vime.bonus.pool.actions[64:128].numpy(), rollout)


def test_ddpg_with_vime_replay_buffer_scores_every_minibatch():
    model = DDPG(
        "MlpPolicy", "Pendulum-v1", learning_starts=50, batch_size=16, seed=0,
        policy_kwargs=dict(net_arch=[8]), replay_buffer_class=VimeReplayBuffer,
        replay_buffer_kwargs=dict(vime=dict(SMALL, posterior="bbb", fit_every=100), seed=0),
    )  # fmt: skip
    model.learn(220, callback=VimeCallback())
    buffer = model.replay_buffer
    assert buffer.bonus.num_fits == 2 and len(buffer.bonus.pool) == 220
    stored = buffer.rewards.copy()
    np.random.seed(7)
    with_bonus = buffer.sample(32)
    np.random.seed(7)
    plain = ReplayBuffer.sample(buffer, 32)
    torch.testing.assert_close(with_bonus.observations, plain.observations)
    added = (with_bonus.rewards - plain.rewards).numpy()
    assert (added > 0).all() and np.isfinite(added).all()
    np.testing.assert_array_equal(buffer.rewards, stored)  # stored rewards stay the task's


def test_vime_callback_on_an_off_policy_algorithm_needs_the_replay_buffer():
    model = DDPG("MlpPolicy", "Pendulum-v1", policy_kwargs=dict(net_arch=[8]), buffer_size=100)
    with pytest.raises(ConfigError, match="needs replay_buffer_class=VimeReplayBuffer"):
        model.learn(10, callback=VimeCallback())
