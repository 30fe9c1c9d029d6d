"""rl-zoo3's ``--optimize`` for :class:`~agents.sb3.policy.ParamExplorePolicy`: a sampler that
keeps the strategy of the hyperparameter file and tunes its noise.

    python -m rl_zoo3.train --algo td3 --env Pendulum-v1 -conf tune.yml \\
        --gym-packages agents.sb3.zoo --optimize-hyperparameters --n-trials 4 --n-timesteps 1500

Why it exists: rl-zoo3's TD3/DDPG sampler returns ``policy_kwargs={'net_arch': …}``, and
its objective puts the sampled keys over the file's, so the file's whole ``policy_kwargs``
(``strategy``, ``actor_grad_scale``, …) is gone in every trial, which then trains the
policy's default strategy with the sampler's action noise on top of the weight noise. And
what the σ study (``docs/sigma.md``) says must be chosen per task — σ₀, one sample per
step or per episode, and the strategy — is not among what it tunes.

Importing this module (``--gym-packages`` imports it before anything is read) replaces
rl-zoo3's sampler for ``td3`` and ``ddpg`` by :func:`sample_zoo_params`. rl-zoo3 keeps
no reference to the hyperparameter file that a sampler could read, except the study's user
attributes, where it stores every default hyperparameter as text before the first trial;
the sampler reads ``policy`` and ``policy_kwargs`` from there. For any policy other than
``ParamExplorePolicy`` it hands over to rl-zoo3's own sampler, unchanged.

For ``ParamExplorePolicy`` what the file's ``policy_kwargs`` fixes is kept, and the rest is
tuned (:func:`sample_param_explore_params`): ``strategy`` (a name keeps it; a list of names
is the categorical choice; absent: :data:`STRATEGIES`), σ₀ (mapped onto the strategy's own
setting by :func:`sigma0_setting`), ``resample``, ``net_arch`` and the actor's learning
rate, with rl-zoo3's TD3 ranges for γ, the batch size, the critic's learning rate,
``train_freq`` and τ. A strategy with weight noise never gets action noise
(``action_noise=None`` also drops a file's ``noise_type``); one without (``adam-plain``,
``sgd-plain``) gets rl-zoo3's choice of none, Gaussian or Ornstein-Uhlenbeck noise.

rl-zoo3's ``--trial-id`` reload of such a trial goes through :func:`load_zoo_trial`, which
rebuilds the hyperparameters the trial trained with (rl-zoo3's converter knows none of them).
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import optuna
from rl_zoo3 import hyperparams_opt
from rl_zoo3.exp_manager import ExperimentManager

import param_explore

from ..common.action_noise import GaussianActionNoise, OrnsteinUhlenbeckActionNoise
from ..common.errors import ConfigError
from .policy import POLICY_ALIAS, ParamExplorePolicy

#: The strategies tuned when the file names none: adaptive σ (Vadam), its fixed-σ ablation,
#: Plappert et al.'s adaptive parameter noise, and action noise on a plain actor.
STRATEGIES: tuple[str, ...] = ("vadam", "fixed-noise", "param-noise", "adam-plain")

#: σ₀'s log-uniform range: c = 1e4 (Khan et al.'s Table 3, σ₀ = 0.01) to c = 10 (σ₀ = 0.32),
#: the span of the σ study (``docs/sigma.md``).
SIGMA0_RANGE: tuple[float, float] = (0.01, 0.32)

#: rl-zoo3's ``net_arch`` choices for TD3 (``convert_offpolicy_params``).
NET_ARCHS: dict[str, list[int]] = {"small": [64, 64], "medium": [256, 256], "big": [400, 300]}

_ZOO_SAMPLER = hyperparams_opt.sample_td3_params


def sigma0_setting(strategy: str, sigma0: float, fixed: Mapping[str, Any]) -> dict[str, float]:
    """The strategy's own setting that makes every weight start at σ = ``sigma0``; empty for a
    strategy without weight noise. ``fixed``: the file's ``actor_optimizer_kwargs``.

    Vadam's σ₀ = 1/√(λ + c) (s starts at 0), so c = 1/σ₀² − λ; the precision strategies
    (VadaGrad, the Explore variants, fixed-noise, noisy Adam, noisy K-FAC) start at
    σ = 1/√p₀; adaptive parameter noise at σ = ``initial_std``; IVON at
    σ₀ = 1/√(ess (h₀ + δ)) (δ: ``weight_decay``): with its preset's h₀ = δ (``hess_init``
    None) δ = 1/(2 ess σ₀²), the prior moving with σ₀; with h₀ or δ fixed by the file,
    h₀ = 1/(ess σ₀²) − δ.
    """
    defaults = param_explore.hyperparameters(strategy)
    if "sample_constant" in defaults:
        prior = fixed.get("prior_precision", defaults["prior_precision"])
        return {"sample_constant": sigma0**-2 - prior}
    if "initial_precision" in defaults:
        return {"initial_precision": sigma0**-2}
    if "initial_std" in defaults:
        return {"initial_std": sigma0}
    if "hess_init" in defaults:
        ess = fixed.get("ess", defaults["ess"])
        if fixed.get("hess_init", defaults["hess_init"]) is None and "weight_decay" not in fixed:
            return {"weight_decay": 1 / (2 * ess * sigma0**2)}  # h₀ = δ moves with it
        decay = fixed.get("weight_decay", defaults["weight_decay"])
        return {"hess_init": 1 / (ess * sigma0**2) - decay}
    return {}


def sample_param_explore_params(
    trial: optuna.Trial, n_actions: int, fixed_policy_kwargs: Mapping[str, Any]
) -> dict[str, Any]:
    """One trial's hyperparameters for TD3/DDPG with ``ParamExplorePolicy``: what
    ``fixed_policy_kwargs`` (the file's ``policy_kwargs``) fixes is kept, the rest sampled.

    The strategy is always a trial parameter (a one-name choice when the file fixes it), so
    every trial's ``params`` say what it trained.
    """
    fixed = dict(fixed_policy_kwargs)
    named = fixed.pop("optimizer" if "optimizer" in fixed else "strategy", None)
    choices = _checked_strategies(STRATEGIES if named is None else named)  # not [] either
    fixed_actor_kwargs = dict(fixed.pop("actor_optimizer_kwargs", None) or {})
    for name in choices:  # before a trial: a refusal is the file's, said once
        _check_actor_kwargs(name, fixed_actor_kwargs)
    strategy = trial.suggest_categorical("strategy", choices)
    actor_kwargs = dict(fixed_actor_kwargs)
    explores = param_explore.optimizer_class(strategy).explores
    if explores:
        setting = sigma0_setting(strategy, 1.0, fixed_actor_kwargs)
        if not setting.keys() & fixed_actor_kwargs.keys():
            sigma0 = trial.suggest_float("sigma0", *SIGMA0_RANGE, log=True)
            actor_kwargs.update(sigma0_setting(strategy, sigma0, fixed_actor_kwargs))
        if "resample" not in fixed:
            fixed["resample"] = trial.suggest_categorical("resample", ["step", "episode"])
    if "lr" not in actor_kwargs:
        actor_kwargs["lr"] = trial.suggest_float("actor_learning_rate", 1e-5, 2e-3, log=True)
    if "net_arch" not in fixed:
        fixed["net_arch"] = NET_ARCHS[trial.suggest_categorical("net_arch", list(NET_ARCHS))]
    policy_kwargs = {**fixed, "strategy": strategy, "actor_optimizer_kwargs": actor_kwargs}
    return {
        **_sample_td3_core(trial),
        "policy_kwargs": policy_kwargs,
        "action_noise": None if explores else _sample_action_noise(trial, n_actions),
    }


def _checked_strategies(named: Any) -> list[str]:
    """The file's ``strategy``: a name, or a non-empty list of names (the choice)."""
    names = [named] if isinstance(named, str) else named
    valid = param_explore.available_optimizers()
    if not isinstance(names, (list, tuple)) or not names or not all(n in valid for n in names):
        raise ConfigError(
            f"policy_kwargs strategy must be a strategy name or a non-empty list of them "
            f"({', '.join(valid)}), got {named!r}"
        )
    return list(names)


def _check_actor_kwargs(strategy: str, fixed: Mapping[str, Any]) -> None:
    """The file's ``actor_optimizer_kwargs`` for ``strategy``, then σ₀ at both ends of
    :data:`SIGMA0_RANGE` where it is tuned, by the strategy's own checks: a prior that puts
    the range out of reach (Vadam's c = 1/σ₀² − λ < 0 for λ > 1/σ₀²) is said in σ₀'s terms
    before a trial, not as the setting σ₀ maps onto when the first trial's model is built."""
    try:
        param_explore.checked_hyperparameters(strategy, fixed)
    except (ValueError, TypeError) as err:
        raise ConfigError(f"policy_kwargs actor_optimizer_kwargs for {strategy}: {err}") from None
    if not sigma0_setting(strategy, 1.0, fixed).keys() - fixed.keys():
        return  # no weight noise, or σ₀ fixed by the file
    low, high = SIGMA0_RANGE
    for sigma0 in SIGMA0_RANGE:
        ((name, value),) = sigma0_setting(strategy, sigma0, fixed).items()
        try:
            param_explore.checked_hyperparameters(strategy, {**fixed, name: value})
        except (ValueError, TypeError) as err:
            raise ConfigError(
                f"sigma0 = {sigma0:g}, an end of the tuned range {low:g}-{high:g}, is out of "
                f"reach for {strategy} with actor_optimizer_kwargs {dict(fixed)}: it would "
                f"need {name} = {value:g}, but {err}; fix sigma0 by setting {name} in "
                "actor_optimizer_kwargs, or change what puts it out of reach"
            ) from None


def _sample_td3_core(trial: optuna.Trial) -> dict[str, Any]:
    """rl-zoo3's TD3 ranges for what the exploration does not concern; ``learning_rate`` is
    the critic's (the policy puts the strategy's own back before each actor step)."""
    train_freq = trial.suggest_int("train_freq", 1, 10)
    return {
        "gamma": 1 - trial.suggest_float("one_minus_gamma", 0.0001, 0.03, log=True),
        "batch_size": 2 ** trial.suggest_int("batch_size_pow", 2, 11),
        "learning_rate": trial.suggest_float("learning_rate", 1e-5, 0.002, log=True),
        "train_freq": train_freq,
        "gradient_steps": train_freq,
        "tau": trial.suggest_float("tau", 0.001, 0.08, log=True),
    }


def _sample_action_noise(
    trial: optuna.Trial, n_actions: int
) -> GaussianActionNoise | OrnsteinUhlenbeckActionNoise | None:
    """rl-zoo3's action-noise choice, for a strategy without weight noise; OU with dt = 1
    (Lillicrap et al.), as ``--opt ou-action``."""
    noise_type = trial.suggest_categorical("noise_type", ["ornstein-uhlenbeck", "normal", None])
    if noise_type is None:
        return None
    sigma = trial.suggest_float("noise_std", 0, 0.5)
    if noise_type == "normal":
        return GaussianActionNoise(n_actions, sigma=sigma)
    return OrnsteinUhlenbeckActionNoise(n_actions, sigma=sigma)


def file_policy(trial: optuna.Trial) -> tuple[str | None, dict[str, Any]]:
    """The hyperparameter file's ``policy`` and ``policy_kwargs``, from the study's user
    attributes where rl-zoo3 stored them (as ``str()``); ``(None, {})`` outside rl-zoo3."""
    study = getattr(trial, "study", None)
    attrs = study.user_attrs if study is not None else {}
    text = attrs.get("policy_kwargs", "{}")
    try:
        policy_kwargs = ast.literal_eval(text)
    except (ValueError, SyntaxError):
        raise ConfigError(
            f"policy_kwargs of a tuned {POLICY_ALIAS} must be literals (names, numbers, "
            f"lists, dicts) to be kept in each trial, got {text}"
        ) from None
    return attrs.get("policy"), policy_kwargs


def is_param_explore(policy: str | None) -> bool:
    """Whether the file's ``policy`` (rl-zoo3's ``str()`` of it) is ``ParamExplorePolicy``:
    the alias, or the class a dotted name resolved to."""
    return policy in (POLICY_ALIAS, str(ParamExplorePolicy))


def sample_zoo_params(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict
) -> dict[str, Any]:
    """rl-zoo3's sampler interface for ``td3`` and ``ddpg``: :func:`sample_param_explore_params`
    with the file's ``policy_kwargs`` for ``ParamExplorePolicy``, rl-zoo3's own otherwise."""
    policy, policy_kwargs = file_policy(trial)
    if not is_param_explore(policy):
        return _ZOO_SAMPLER(trial, n_actions, n_envs, additional_args)
    if additional_args.get("using_her_replay_buffer"):
        raise ConfigError(f"tuning {POLICY_ALIAS} with a HER replay buffer is not supported")
    return sample_param_explore_params(trial, n_actions, policy_kwargs)


def load_zoo_trial(
    manager: ExperimentManager,
    storage: str,
    study_name: str,
    trial_id: int | None = None,
    convert: bool = True,
) -> dict[str, Any]:
    """rl-zoo3's ``--storage … --study-name … --trial-id N`` reload
    (``ExperimentManager.load_trial``) of a trial of :func:`sample_param_explore_params`:
    the hyperparameters that trial trained with. rl-zoo3's own TD3 converter knows neither
    the strategy, σ₀, ``resample`` nor the actor's learning rate (they would reach TD3 as
    unknown arguments), and its ``policy_kwargs`` replace the file's. Here the sampler runs
    again on the trial's values (optuna's ``FixedTrial``) with the study's ``policy_kwargs``
    (those the trials kept). A trial of any other sampler is rl-zoo3's to convert."""
    params = _ZOO_LOAD_TRIAL(manager, storage, study_name, trial_id, convert=False)
    if not convert or "strategy" not in params:  # "strategy": always this sampler's
        return _ZOO_LOAD_TRIAL(manager, storage, study_name, trial_id, convert)
    if storage.endswith(".log"):  # as rl-zoo3 opens it
        backend = optuna.storages.journal.JournalFileBackend(storage)
        study = optuna.load_study(storage=optuna.storages.JournalStorage(backend),
                                  study_name=study_name)  # fmt: skip
    else:
        study = optuna.load_study(storage=storage, study_name=study_name)
    fixed = ast.literal_eval(study.user_attrs.get("policy_kwargs", "{}"))
    env = gym.make(manager.env_name.gym_id, **manager.env_kwargs)  # n_actions, for noise
    n_actions = env.action_space.shape[0]
    env.close()
    return sample_param_explore_params(optuna.trial.FixedTrial(params), n_actions, fixed)


def sample_or_refuse(
    trial: optuna.Trial, n_actions: int, n_envs: int, additional_args: dict
) -> dict[str, Any]:
    """:func:`sample_zoo_params` as rl-zoo3 calls it: a refusal (the file's, before any
    trial trains) is one line on stderr and exit 2. Raised, it would reach optuna, which
    logs every exception of a trial with its traceback ("Trial 0 failed …") and raises it
    again, ending rl-zoo3 with a second one; ``SystemExit`` is no trial's failure to
    optuna and passes through."""
    try:
        return sample_zoo_params(trial, n_actions, n_envs, additional_args)
    except ConfigError as err:
        print(f"rl_zoo3 -optimize: error: {err}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None


def register_sampler() -> None:
    """Make rl-zoo3's ``--optimize`` use :func:`sample_zoo_params` for TD3 and DDPG (its
    refusals in one line: :func:`sample_or_refuse`), and its ``--trial-id`` reload
    :func:`load_zoo_trial`."""
    for algo in ("td3", "ddpg"):
        hyperparams_opt.HYPERPARAMS_SAMPLER[algo] = sample_or_refuse
    ExperimentManager.load_trial = load_zoo_trial


_ZOO_LOAD_TRIAL = ExperimentManager.load_trial
register_sampler()
