"""``ParamExplorePolicy``: the exploration strategies inside unmodified Stable-Baselines3.

    import agents.sb3.policy  # registers the "ParamExplorePolicy" alias for DDPG and TD3
    model = DDPG("ParamExplorePolicy", env, policy_kwargs=dict(strategy="vadam"))

How each requirement is met with SB3's own ``DDPG.train()`` / ``TD3.train()``:

* **Actor loss at sampled weights.** The actor's ``forward`` runs, while the actor is in
  training mode (SB3 sets it for ``train()`` only), on θ = μ + σ⊙ε from the strategy's
  functional ``sample()`` through ``torch.func.functional_call``. θ is differentiable
  w.r.t. μ, so SB3's ``actor_loss.backward()`` leaves ∇θ of the loss in ``p.grad`` and its
  bare ``optimizer.step()`` applies the strategy's update (the Explore variants derive
  the precision gradient from it and the stored ε).
* **Same θ for acting and learning.** ``predict(deterministic=False)`` (rollouts) draws a
  new ε and acts with θ; the next ``train()`` reuses that ε
  (``docs/decisions.md#sample-per-step``). With ``resample="episode"``, ε is redrawn
  by :class:`ParamExploreCallback` at episode ends instead. A VecEnv's environments
  share one θ per step.
* **The mean elsewhere.** The target actor is a separate module with no strategy, so it
  and ``polyak_update`` see μ. ``predict(deterministic=True)`` — ``EvalCallback``,
  ``evaluate_policy`` — acts with μ. Rollouts never change μ or σ.
* **The strategy's own learning rate.** SB3 writes its single ``learning_rate`` schedule
  into every optimizer's param groups at each ``train()`` call. A step pre-hook on the
  actor's optimizer puts the strategy's learning rate (Table 3, or the override) back
  right before each step, so SB3's ``learning_rate`` is the critic's alone.
* **Summed policy gradient.** SB3 averages the actor loss over the minibatch. The paper's
  summed gradient (``docs/decisions.md#summed-gradient``) is obtained with
  ``actor_grad_scale=batch_size``, applied to the gradient by the same pre-hook.
* **Other strategies.** ``noisy-kfac`` watches the actor's ``nn.Linear`` layers through
  hooks, so its sampled forward goes through ``functional_call`` (which calls the
  modules) instead of the plain-MLP fast path. ``param-noise`` acts with θ but is trained
  at μ; :class:`ParamExploreCallback` adapts its σ and, with ``resample="episode"`` (its
  preset), redraws the perturbation per episode. The action-noise baselines are
  ``strategy="adam-plain"`` plus SB3's own ``action_noise=`` argument (e.g.
  :class:`agents.common.action_noise.OrnsteinUhlenbeckActionNoise`).
* **Saving.** ``model.save`` stores ``actor.optimizer``'s full state (moments, precision,
  noise, step); ``DDPG.load`` rebuilds the strategy from ``policy_kwargs`` and loads it.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Literal

import numpy as np
import torch
from gymnasium import spaces
from stable_baselines3 import TD3
from stable_baselines3.common.callbacks import BaseCallback, CallbackList, EvalCallback
from stable_baselines3.common.type_aliases import PyTorchObs, Schedule
from stable_baselines3.td3.policies import Actor, TD3Policy
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn import functional as F

import param_explore
from param_explore import linear_layers
from param_explore.validation import require_positive

from ..common.initialisation import INIT_SCHEMES, initialise_actor_, initialise_critic_
from ..common.noise_redraw import redrawn_after_episodes, redrawn_every_step
from ..common.strategies import resolve_strategy
from ..common.tags import (
    EVAL_MEAN_RETURN,
    EVAL_STD_RETURN,
    EVAL_SUCCESS_RATE,
    SIGMA,
    Sigma,
    explore_scalars,
    layer_names,
    learning_rate_scalars,
    renamed_layers,
)
from ..common.warnings_once import show_mujoco_warnings_once

POLICY_ALIAS = "ParamExplorePolicy"
#: The strategy of a policy built without one (with a warning: a dropped ``strategy`` is
#: otherwise indistinguishable from a chosen default).
DEFAULT_STRATEGY = "vadam"


class ParamExploreActor(Actor):
    """SB3's TD3/DDPG actor, evaluated at sampled weights while it is in training mode.

    ``optimizer`` is the exploration strategy (set by the policy); the target actor and
    an actor loaded on its own have none and always use their weights as they are.
    """

    optimizer: param_explore.WeightSampling | None = None

    def __init__(self, *args: Any, layer_norm: bool = False, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.layer_norm = layer_norm
        if layer_norm:  # a LayerNorm after each hidden Linear, before its activation
            linears = [m for m in self.mu if isinstance(m, nn.Linear)]
            layers: list[nn.Module] = []
            for module in self.mu:
                layers.append(module)
                if isinstance(module, nn.Linear) and module is not linears[-1]:
                    layers.append(nn.LayerNorm(module.out_features))
            self.mu = nn.Sequential(*layers)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        return {**super()._get_constructor_parameters(), "layer_norm": self.layer_norm}

    def _explores(self) -> bool:
        return self.optimizer is not None and self.optimizer.explores

    def forward(self, obs: Tensor, use_sample: bool = True) -> Tensor:
        # Training mode = SB3's train(): the loss is taken where the strategy wants its
        # gradient — at θ, or at μ for adaptive parameter noise.
        if use_sample and self.training and self._explores() and self.optimizer.gradient_at_sample:
            return self.sampled_forward(obs)
        return super().forward(obs)

    def sampled_forward(self, obs: Tensor) -> Tensor:
        """The actor at θ = μ + σ⊙ε (current ε), differentiable w.r.t. μ."""
        if not self._explores():
            return super().forward(obs)
        return self.forward_at(obs, self.optimizer.named_sample())

    def forward_at(self, obs: Tensor, named: Mapping[str, Tensor]) -> Tensor:
        """The actor at weights given by parameter name."""
        if self._is_plain_mlp() and not self.optimizer.needs_module_calls:
            # SB3's default actor (flatten → Linear/activation stack): apply θ layer by
            # layer, by name, without functional_call's per-call module re-parametrisation.
            hidden = self.extract_features(obs, self.features_extractor)
            for index, layer in enumerate(self.mu):
                if isinstance(layer, nn.Linear):
                    hidden = F.linear(
                        hidden, named[f"mu.{index}.weight"], named[f"mu.{index}.bias"]
                    )
                else:
                    hidden = layer(hidden)
            return hidden
        return functional_call(self, named, (obs,), {"use_sample": False})

    def _is_plain_mlp(self) -> bool:
        if not hasattr(self, "_plain_mlp"):
            mu_params = sum(1 for _ in self.mu.parameters())
            linear_params = sum(
                2 for m in self.mu if isinstance(m, nn.Linear) and m.bias is not None
            )
            self._plain_mlp = mu_params == linear_params == sum(1 for _ in self.parameters())
        return self._plain_mlp


class ParamExplorePolicy(TD3Policy):
    """TD3/DDPG policy whose actor is trained and explores with a ``param_explore`` strategy.

    :param strategy: the strategy's name (``param_explore.available_optimizers()``),
        resolved as ``--opt`` is (``resolve_strategy``); its optimizer is ``actor.optimizer``.
        (``optimizer=`` is read as ``strategy=``, for models saved by earlier versions.)
        None: :data:`DEFAULT_STRATEGY`, with a warning.
    :param actor_optimizer_kwargs: overrides of the strategy's Table 3 defaults.
    :param resample: ``step`` (a new θ every rollout step, the paper) or ``episode``
        (needs :class:`ParamExploreCallback` to redraw at episode ends); None: the
        strategy's own choice (``episode`` for ``param-noise``, else ``step``).
    :param actor_grad_scale: factor on the actor gradient before each step; the paper's
        summed minibatch gradient is ``batch_size`` (SB3's loss is a mean).
    :param init: how the actor and the critics start: ``sb3`` (SB3's own, torch's default
        layers), or a scheme of :mod:`agents.common.initialisation` (``khan2018``: the authors'
        released code, as the native agent's default; ``lillicrap``). Targets start equal
        to the networks either way.
    :param layer_norm: a LayerNorm after each hidden layer of the actor, never perturbed
        (Plappert et al.'s parameter-noise actor); None: the strategy's own choice (on for
        ``param-noise`` only), as in the native agent and ``train_agent``.
    SB3's ``optimizer_class``/``optimizer_kwargs`` and ``learning_rate`` apply to the
    critic only.
    """

    actor: ParamExploreActor
    actor_target: ParamExploreActor

    def __init__(
        self,
        observation_space: spaces.Space,
        action_space: spaces.Box,
        lr_schedule: Schedule,
        strategy: str | None = None,
        actor_optimizer_kwargs: dict[str, Any] | None = None,
        resample: Literal["step", "episode"] | None = None,
        actor_grad_scale: float = 1.0,
        init: Literal["sb3", "khan2018", "lillicrap"] = "sb3",
        layer_norm: bool | None = None,
        optimizer: str | None = None,
        **kwargs: Any,
    ) -> None:
        strategy = optimizer or strategy or _default_strategy()
        if resample not in ("step", "episode", None):
            raise ValueError(f"resample must be 'step', 'episode' or None, got {resample!r}")
        if init != "sb3" and init not in INIT_SCHEMES:
            schemes = ", ".join(("sb3", *INIT_SCHEMES))
            raise ValueError(f"init must be one of {schemes}, got {init!r}")
        self.init = init
        self.strategy = strategy
        self.actor_optimizer_kwargs = dict(actor_optimizer_kwargs or {})
        # The one translation of a strategy's name (its defaults of resample and layer_norm
        # included); unknown names and bad settings fail here.
        self.resolved = resolve_strategy(
            strategy,
            optimizer_kwargs=self.actor_optimizer_kwargs,
            layer_norm=layer_norm,
            resample=resample,
        )
        if self.resolved.noise is not None:
            raise ValueError(
                f"strategy {strategy!r} adds action noise, which SB3 takes as its own "
                f"action_noise= argument: use strategy={self.resolved.optimizer!r} with it"
            )
        self.resample = self.resolved.resample
        self.actor_grad_scale = require_positive("actor_grad_scale", actor_grad_scale)
        self.layer_norm = self.resolved.layer_norm
        super().__init__(observation_space, action_space, lr_schedule, **kwargs)

    def make_actor(self, features_extractor=None) -> ParamExploreActor:
        actor_kwargs = self._update_features_extractor(self.actor_kwargs, features_extractor)
        return ParamExploreActor(**actor_kwargs, layer_norm=self.layer_norm).to(self.device)

    def _build(self, lr_schedule: Schedule) -> None:
        super()._build(lr_schedule)
        if self.init != "sb3":
            initialise_actor_(linear_layers(self.actor.mu), self.init)
            for q_network in self.critic.q_networks:
                initialise_critic_(linear_layers(q_network), self.init)
            self.actor_target.load_state_dict(self.actor.state_dict())
            self.critic_target.load_state_dict(self.critic.state_dict())
        optimizer = param_explore.make_optimizer(
            self.resolved.optimizer_class, self.actor, **self.resolved.optimizer_kwargs
        )
        self._strategy_lrs = [group["lr"] for group in optimizer.param_groups]
        optimizer.register_step_pre_hook(self._before_actor_step)
        self.actor.optimizer = optimizer

    def _before_actor_step(
        self, optimizer: param_explore.WeightSampling, args: Any, kwargs: Any
    ) -> None:
        for group, lr in zip(optimizer.param_groups, self._strategy_lrs):
            group["lr"] = lr  # undo SB3's learning-rate schedule: that one is the critic's
        if self.actor_grad_scale != 1.0:  # the gradient and what was recorded with it
            optimizer.scale_gradients_(self.actor_grad_scale)

    def _get_constructor_parameters(self) -> dict[str, Any]:
        data = super()._get_constructor_parameters()
        data.update(
            strategy=self.strategy,
            actor_optimizer_kwargs=self.actor_optimizer_kwargs,
            resample=self.resample,
            actor_grad_scale=self.actor_grad_scale,
            init=self.init,
            layer_norm=self.layer_norm,
        )
        return data

    def _predict(self, observation: PyTorchObs, deterministic: bool = False) -> Tensor:
        if deterministic:
            return self.actor(observation, use_sample=False)
        if redrawn_every_step(self.resample):
            self.actor.optimizer.resample_noise()
        return self.actor.sampled_forward(observation)

    def exploration_statistics(self) -> dict[str, float]:
        """The strategy's ``explore/*`` scalars: σ over all actor weights, and its own; a
        layer's under the native actor's name for it (``mu.0`` → ``net.0``,
        :mod:`agents.common.tags`), so both engines' runs overlay."""
        linears = (
            f"mu.{i}" for i, module in enumerate(self.actor.mu) if isinstance(module, nn.Linear)
        )
        return renamed_layers(self.actor.optimizer.exploration_statistics(), layer_names(linears))

    def learning_rates(self) -> dict[str, float]:
        """``train/actor_learning_rate`` (the strategy's) and ``train/critic_learning_rate``
        (SB3's ``learning_rate`` schedule, now)."""
        critic = self.critic.optimizer.param_groups[0]["lr"]
        return learning_rate_scalars(self._strategy_lrs[0], critic)


def _default_strategy() -> str:
    """:data:`DEFAULT_STRATEGY`, said out loud: a sampler or config layer that replaces
    ``policy_kwargs`` (rl-zoo3's ``--optimize`` does) would otherwise train it silently."""
    warnings.warn(
        f"{POLICY_ALIAS} got no strategy in policy_kwargs: training the default "
        f"{DEFAULT_STRATEGY!r}. Name one (policy_kwargs=dict(strategy=...)); for rl-zoo3's "
        "--optimize, add --gym-packages agents.sb3.zoo, whose sampler keeps it",
        stacklevel=3,
    )
    return DEFAULT_STRATEGY


class ParamExploreCallback(BaseCallback):
    """Records σ statistics of the actor to SB3's logger; redraws ε at episode ends;
    adapts adaptive parameter noise.

    Every ``log_every`` steps it records the project's tags (:mod:`agents.common.tags`,
    the native engine's): ``explore/sigma_*`` for a strategy with weight noise (σ printed
    with four significant digits on SB3's stdout table), a strategy's own such as
    ``explore/clamped_fraction``, and both learning rates; after each evaluation of an
    ``EvalCallback`` in the same ``learn`` call (rl-zoo3's too), ``eval/mean_return`` (and
    ``eval/std_return``, ``eval/success_rate`` where it keeps its episodes: ``log_path``),
    at the evaluation's step, beside SB3's ``eval/mean_reward``. With ``param-noise``,
    every ``adaptation_interval`` steps σ is adapted to the action-space distance
    between the perturbed and the mean actor on a replay minibatch's states.
    """

    def __init__(self, log_every: int = 1000, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.log_every = log_every
        #: Evaluations already recorded, per ``EvalCallback`` (by id).
        self._evaluations: dict[int, int] = {}

    def _on_training_start(self) -> None:
        policy, noise = self.model.policy, getattr(self.model, "action_noise", None)
        if isinstance(policy, ParamExplorePolicy) and "strategy" not in self.model.policy_kwargs:
            # SB3 saves the model's policy_kwargs as given and rebuilds the policy from them
            # on load, which would warn of the default again; saved with the strategy it
            # trained, a model loads as it trained, silently (a new dict: not the caller's).
            self.model.policy_kwargs = {**self.model.policy_kwargs, "strategy": policy.strategy}
        if (
            isinstance(policy, ParamExplorePolicy)
            and policy.actor.optimizer.explores
            and noise is not None
        ):
            warnings.warn(
                f"{policy.strategy!r} explores with weight noise and the model adds action "
                f"noise {noise!r} on top; drop action_noise (or use strategy='adam-plain')",
                stacklevel=2,
            )

    def _on_step(self) -> bool:
        policy = self.model.policy
        if not isinstance(policy, ParamExplorePolicy):
            raise TypeError("ParamExploreCallback needs a model with ParamExplorePolicy")
        if redrawn_after_episodes(policy.resample, self.locals.get("dones")):
            policy.actor.optimizer.resample_noise()
        if self.num_timesteps % self.log_every < self.training_env.num_envs:
            self._record_scalars(policy)
        self._record_evaluations()
        interval = policy.actor.optimizer.noise_adaptation_interval
        if (
            interval
            and self.num_timesteps % interval < self.training_env.num_envs
            and self.model.replay_buffer.size() >= self.model.batch_size
        ):
            self._adapt_noise(policy)
        return True

    def _on_training_end(self) -> None:
        self._record_evaluations()  # one an EvalCallback after this one made at the last step

    def _record_scalars(self, policy: ParamExplorePolicy) -> None:
        explores = policy.actor.optimizer.explores
        for tag, value in explore_scalars(policy.exploration_statistics(), explores).items():
            sigma = tag.partition("/")[2].startswith(SIGMA)
            self.logger.record(tag, Sigma(value) if sigma else value)
        for tag, value in policy.learning_rates().items():
            self.logger.record(tag, value)

    def _record_evaluations(self) -> None:
        """The project's ``eval/`` tags of each ``EvalCallback`` evaluation not yet
        recorded, written at its step (an ``EvalCallback`` writes its own at once too)."""
        for evaluator in _eval_callbacks(self.locals.get("callback")):
            done = evaluator.n_calls // evaluator.eval_freq if evaluator.eval_freq > 0 else 0
            if done <= self._evaluations.get(id(evaluator), 0):
                continue
            self._evaluations[id(evaluator)] = done
            self.logger.record(EVAL_MEAN_RETURN, evaluator.last_mean_reward)
            if len(evaluator.evaluations_results) == done:  # kept with a log_path
                self.logger.record(
                    EVAL_STD_RETURN, float(np.std(evaluator.evaluations_results[-1]))
                )
            if len(evaluator.evaluations_successes) == done:  # kept with a log_path
                self.logger.record(
                    EVAL_SUCCESS_RATE, float(np.mean(evaluator.evaluations_successes[-1]))
                )
            self.logger.dump(evaluator.num_timesteps)

    @torch.no_grad()
    def _adapt_noise(self, policy: ParamExplorePolicy) -> None:
        """The strategy's noise adaptation on a replay minibatch's states."""
        obs = self.model.replay_buffer.sample(self.model.batch_size).observations
        actor = policy.actor

        def actions_at(weights: Mapping[str, Tensor] | None) -> Tensor:
            # SB3's actor outputs actions already normalised to [-1, 1].
            if weights is None:
                return actor(obs, use_sample=False)
            return actor.forward_at(obs, weights)

        actor.optimizer.adapt_noise(actions_at)


def _eval_callbacks(callback: BaseCallback | None) -> list[EvalCallback]:
    """The ``EvalCallback`` instances among ``callback`` (a ``CallbackList``'s, nested)."""
    if isinstance(callback, EvalCallback):
        return [callback]
    if isinstance(callback, CallbackList):
        return [found for child in callback.callbacks for found in _eval_callbacks(child)]
    return []


def register_policy_alias() -> None:
    """Make ``DDPG("ParamExplorePolicy", ...)`` and ``TD3(...)`` resolve to the class."""
    TD3.policy_aliases[POLICY_ALIAS] = ParamExplorePolicy  # DDPG shares TD3's mapping


register_policy_alias()
# SB3's users make their envs with gym.make (or SB3 from an id), not with make_env: the
# import that brings the policy installs MuJoCo's once-per-message handler, so gymnasium's
# MuJoCo models warn once, and MuJoCo's own handler does not write MUJOCO_LOG.TXT into the
# user's directory.
show_mujoco_warnings_once()
