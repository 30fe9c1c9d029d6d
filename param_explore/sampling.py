"""The weight-sampling interface shared by every exploration optimizer.

Each optimizer keeps a Gaussian q(θ) = N(μ, σ²) over the parameters it owns: the
``torch.nn.Parameter`` tensors hold the mean μ, and σ is derived from the optimizer's
own state (its second-moment or precision vector). Exploration means evaluating the
network at a sample θ = μ + σ⊙ε instead of at μ (Khan et al. 2018, Alg. 1-2 line 3).

Three things must hold for DDPG with parameter exploration (Appendix K and the
authors' released code, ``docs/decisions.md#sample-per-step``):

* the *same* θ_t acts in the environment at step t and receives that step's actor
  gradient. The noise ε is therefore drawn explicitly with :meth:`resample_noise` and
  kept in the optimizer state until the next draw; every way of evaluating θ uses it;
* the gradient handed to :meth:`step` is ∇θF at the sample. Because θ = μ + σ⊙ε with σ
  held fixed, ∂θ/∂μ = I and ∇μF(θ) = ∇θF(θ), so gradients may land on the parameter
  tensors either by running the network on the parameters overwritten with θ
  (:meth:`sampled_params`) or by running it functionally on tensors differentiable
  w.r.t. μ (:meth:`sample`);
* the mean is restored *exactly* (a copy, not θ − σ⊙ε, which would drift by rounding).

Strategies that do not sample (``sgd-plain``, ``adam-plain``) implement the same
interface with σ = 0 and no noise at all, so callers never branch on the strategy.

Parameters of a group with ``perturb=False`` are trained by the strategy but never
perturbed: their ε stays zero, so θ = μ for them on every path (eager and traced), their σ
reads 0 and they are left out of :meth:`exploration_statistics`. ``make_optimizer`` puts a
network's LayerNorm parameters in such a group, as Plappert et al. (2018) perturb a
layer-normalised actor but not its normalisation (``docs/decisions.md#layer-norm``).
Adaptive parameter noise (``param-noise``) acts with θ but is trained at μ; callers take
the gradient inside :meth:`training_params`, which puts the right weights in place for
every strategy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, ClassVar

import torch
from torch import Tensor

from .traceable import (
    Mode,
    StateTensors,
    TraceableStep,
    UntraceableOptimizerError,
    group_names,
    single_group,
)
from .validation import Checks


def skips_non_finite(step: Callable) -> Callable:
    """Decorate a strategy's ``step()``: a non-finite gradient skips the whole step.

    Nothing changes — not μ, not σ, not the optimizer state or its step count — and the
    skip is counted in ``skipped_steps``. The guard is the strategy's own, so every caller
    has it: the native agent, SB3's bare ``optimizer.step()``, a user's loop. A closure,
    if given, is evaluated first (torch.optim's convention) and its loss returned.
    """

    @functools.wraps(step)
    def guarded(self: WeightSampling, closure: Callable[[], float] | None = None) -> float | None:
        loss = self._closure_loss(closure)
        grads = [p.grad for p in self._params() if p.grad is not None]
        if grads and not bool(torch.cat([torch.isfinite(g).all().reshape(1) for g in grads]).all()):
            self._skip_step()
        else:
            step(self)
        return loss

    return guarded


class WeightSampling:
    """Mixin adding the sampling interface to a ``torch.optim.Optimizer``.

    Subclasses set :attr:`explores` and implement :meth:`_std` (σ from the state tensors:
    the one place a strategy's σ is written). The noise ε
    of each parameter lives in ``self.state[p]["noise"]`` so that it is saved by
    ``state_dict()`` and a reloaded run reuses the very θ it was acting with. Work is done
    with ``torch._foreach_*`` ops over all tensors of a group: the per-step cost of sampling
    is a handful of kernel launches, not a handful per parameter tensor.
    """

    #: Whether weights are perturbed at all. ``False`` gives σ = 0 and θ = μ.
    explores: bool = True
    #: Whether ``step()`` expects ∇F at the sample θ (variational optimisation: every
    #: Khan et al. and Zhang et al. strategy) or at the mean μ (adaptive parameter noise,
    #: which perturbs the acting policy only).
    gradient_at_sample: bool = True
    #: True when the strategy observes the network's layers through module hooks (noisy
    #: K-FAC): the network must then be evaluated by calling its modules — with
    #: :meth:`sampled_params` or ``torch.func.functional_call`` — not by a hand-written
    #: functional forward that bypasses them.
    needs_module_calls: bool = False
    #: When a caller that does not say otherwise draws new noise: every environment
    #: ``step`` (Khan et al., Alg. 1-2 line 3) or every ``episode`` (parameter noise).
    default_resample: str = "step"
    #: Whether the network this strategy explores with normalises its hidden layers when
    #: a caller does not say (``layer_norm: null``): parameter noise perturbs a
    #: layer-normalised actor (Plappert et al. 2018), every other strategy a plain one.
    default_layer_norm: bool = False
    #: How a DDPG actor's minibatch loss is reduced when its settings leave it out
    #: (``actor_grad_reduction: null``): ``sum``, as Khan et al.'s released code does, for
    #: every strategy but IVON, whose effective sample size counts data points, so that its
    #: loss is the expected loss over them, a ``mean`` (Shen et al. 2024, Sec. 2).
    default_actor_grad_reduction: str = "sum"
    #: Whether the strategy trains a network with normalisation layers (noisy K-FAC has
    #: Kronecker factors for ``nn.Linear`` layers only).
    supports_layer_norm: bool = True
    #: Environment steps between two calls of :meth:`adapt_noise`; None: never called.
    noise_adaptation_interval: int | None = None
    #: Steps skipped because a gradient was not finite (:func:`skips_non_finite`).
    skipped_steps: int = 0
    #: How each setting is checked: name → ``check(name, value)``, which returns the value
    #: as kept or raises a ValueError naming the setting (:mod:`param_explore.validation`).
    _setting_checks: ClassVar[Checks] = {}

    @classmethod
    def checked_settings(cls, **settings: Any) -> dict[str, Any]:
        """The settings as the optimizer keeps them (its param-group defaults), or a
        ValueError saying which is wrong: the optimizer's own checks, run before anything is
        built, so that a run's settings are refused before it allocates."""
        checked = {name: cls._setting_checks[name](name, value) for name, value in settings.items()}
        cls._check_together(checked)
        return checked

    @classmethod
    def check_setting(cls, name: str, value: Any) -> Any:
        """One setting by its own check (a value computed from others, e.g. a posterior's
        from its prior): as kept, or a ValueError naming it."""
        return cls._setting_checks[name](name, value)

    @classmethod
    def _check_together(cls, settings: dict[str, Any]) -> None:
        """Checks that involve several settings (none by default)."""

    # Provided by torch.optim.Optimizer.
    param_groups: list[dict]
    state: dict

    # ------------------------------------------------------------------ internals
    def _group_sampling_std(self, group: dict) -> list[Tensor]:
        """σ of every parameter of ``group`` from the optimizer state (new tensors): the
        strategy's :meth:`_std` on its state, with the numbers of its coming step."""
        states = [self._init_state(group, p) for p in group["params"]]
        state = {key: [s[key] for s in states] for key in self._state_keys}
        return self._std(group, state, self._coefficients(group, _coming_step(states)))

    def _skip_step(self) -> None:
        """Count a step skipped for a non-finite gradient (strategies drop what they
        recorded for it)."""
        self.skipped_steps += 1

    @staticmethod
    def _closure_loss(closure: Callable[[], float] | None) -> float | None:
        """torch.optim's convention: a closure re-evaluates the loss, with gradients."""
        if closure is None:
            return None
        with torch.enable_grad():
            return closure()

    def _params(self) -> list[Tensor]:
        return [p for group in self.param_groups for p in group["params"]]

    def param_names(self) -> list[str]:
        """The parameters' names in ``param_groups`` order: what a network is called with
        (``make_optimizer`` builds every strategy from the network's named parameters)."""
        names = [name for group in self.param_groups for name in group.get("param_names", ())]
        if len(names) != len(self._params()):
            raise ValueError(
                f"{type(self).__name__} was built from unnamed parameters; build it with "
                "make_optimizer(name, network) or from network.named_parameters()"
            )
        return names

    def named_sample(self) -> dict[str, Tensor]:
        """:meth:`sample` by parameter name, for ``network(obs, weights)`` or
        ``torch.func.functional_call``."""
        return dict(zip(self.param_names(), self.sample(), strict=True))

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """torch's ``load_state_dict`` with the saved state matched to the parameters by
        name (torch matches by position): a network whose parameters are listed in another
        order gets each its own state, and one with other parameters is refused."""
        super().load_state_dict(state_by_name(self, state_dict))  # type: ignore[misc]

    def _perturbed_groups(self) -> list[dict]:
        return [group for group in self.param_groups if group.get("perturb", True)]

    def _is_perturbed(self, p: Tensor) -> bool:
        return any(p is q for group in self._perturbed_groups() for q in group["params"])

    def _group_noise(self, group: dict, generator: torch.Generator | None = None) -> list[Tensor]:
        """ε of every parameter of ``group``, drawn on first use (zero if not perturbed)."""
        noises = []
        for p in group["params"]:
            state = self.state[p]
            if "noise" not in state:
                if self._is_perturbed(p):
                    state["noise"] = torch.randn(
                        p.shape, dtype=p.dtype, device=p.device, generator=generator
                    )
                else:
                    state["noise"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            noises.append(state["noise"])
        return noises

    def _sampled(self, params: list[Tensor]) -> list[Tensor]:
        """θ = μ + σ⊙ε as new tensors (one fused pass); overridden by correlated noise.

        Used by both :meth:`sample` and :meth:`sampled_params`."""
        return torch._foreach_addcmul(params, *self._stds_and_noises())

    @torch.no_grad()
    def _stds_and_noises(self) -> tuple[list[Tensor], list[Tensor]]:
        """σ and ε of every parameter, in ``param_groups`` order (σ detached, new tensors)."""
        stds, noises = [], []
        for group in self.param_groups:
            stds.extend(self._group_sampling_std(group))
            noises.extend(self._group_noise(group))
        return stds, noises

    # ------------------------------------------------------------------ public API
    @torch.no_grad()
    def resample_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw a fresh ε ~ N(0, I) for every parameter (in place, no allocation).

        Call once per environment step (the paper) or once per episode (Appendix K,
        footnote 10). Noise-free strategies do nothing and consume no random numbers.
        """
        if not self.explores:
            return
        for group in self._perturbed_groups():
            for p in group["params"]:
                state = self.state[p]
                if "noise" in state:
                    state["noise"].normal_(generator=generator)
            self._group_noise(group, generator)

    def perturbed(self) -> list[bool]:
        """Whether each parameter (``param_groups`` order) gets weight noise: where a caller
        that draws ε itself (:meth:`noise_changed`) draws it; noise-free strategies none."""
        return [self.explores and self._is_perturbed(p) for p in self._params()]

    @torch.no_grad()
    def noise_changed(self) -> None:
        """ε was written in place by the caller — a population draws every member's ε in
        one call into storage the members' ε are views of — : recompute what this strategy
        derives from ε (parameter noise's acting copy, noisy K-FAC's perturbation), as
        :meth:`resample_noise` does after its own draw. Nothing for the others."""

    def sample(self) -> list[Tensor]:
        """θ = μ + σ⊙ε for every parameter, differentiable w.r.t. μ.

        The functional path: the parameters are not touched, so code that must keep
        them intact (an SB3 policy, a concurrent evaluation) can run the network with
        ``torch.func.functional_call`` on these tensors. Backpropagating a loss through
        them fills ``p.grad`` with ∇θF(θ). Noise-free strategies return the parameters;
        parameter noise returns its acting copy, fixed for the episode (it is trained at μ,
        :attr:`gradient_at_sample` is false).
        """
        params = self._params()
        if not self.explores:
            return params
        return self._sampled(params)

    @torch.no_grad()
    def posterior_sample(self, noises: list[Tensor]) -> list[Tensor]:
        """θ = μ + σ⊙ε for the given ε (``param_groups`` order, any leading batch
        dimensions), detached; the optimizer's own ε is untouched.

        For drawing many samples at once, e.g. the Monte Carlo samples of an information
        gain (noisy K-FAC draws its correlated noise from the given ε).
        """
        return [p.detach() + s * e for p, s, e in zip(self._params(), self.sampling_std(), noises)]

    @contextmanager
    def sampled_params(self) -> Iterator[None]:
        """Temporarily write θ = μ + σ⊙ε into the parameters; restore μ exactly on exit.

        Gradients computed inside land in ``p.grad`` as ∇θF(θ). μ is restored exactly (its
        own tensors are put back), also when the body raises.
        """
        if not self.explores:
            yield
            return
        params = self._params()
        # θ is computed out of place and swapped in as the parameters' data; μ's own
        # tensors are kept aside untouched and swapped back: exact, and no copies.
        means = [p.data for p in params]
        with torch.no_grad():
            thetas = self._sampled(means)
        for p, theta in zip(params, thetas):
            p.data = theta
        try:
            yield
        finally:
            for p, mean in zip(params, means):
                p.data = mean

    @contextmanager
    def training_params(self) -> Iterator[None]:
        """The parameters at which the gradient for :meth:`step` must be taken.

        θ (as :meth:`sampled_params`) for the variational strategies, μ untouched for
        those trained at the mean (:attr:`gradient_at_sample` false) and the plain ones.
        Run forward *and* backward inside.
        """
        if not self.gradient_at_sample:
            yield
            return
        with self.sampled_params():
            yield

    # ------------------------------------------------------------------ the update
    # A strategy defines its rule once, as :meth:`_update` over lists of tensors (calling
    # its module-level rule function), with the step's numbers from :meth:`_coefficients`
    # and its σ from :meth:`_std`. The same serve :meth:`step` (``mode="eager"``: numbers as
    # Python floats, torch's fast foreach and fused kernels) and :meth:`traceable_step`
    # (``mode="traced"``: numbers as 0-d tensors inside a compiled graph, which computes
    # the step-dependent ones from the step count it keeps on the device). The caller names
    # the mode; no rule guesses it.

    #: The per-parameter state tensors :meth:`_update` reads and writes (ε is ``noise``).
    _state_keys: tuple[str, ...] = ()

    def _init_state(self, group: Mapping, p: Tensor) -> dict:
        """The parameter's state, created on first use (with its ``step`` count)."""
        raise NotImplementedError

    def _coefficients(self, group: Mapping, step: int | Tensor) -> tuple:
        """The numbers step ``step`` (≥ 1) of the rule needs, as a NamedTuple of floats; for
        a float64 tensor ``step`` (a compiled graph's count) its step-dependent numbers are
        tensors: write them with ops that take either (``beta**step``,
        :func:`~param_explore.traceable.step_sqrt`)."""
        raise NotImplementedError

    def _std(self, group: Mapping, state: StateTensors, c: tuple) -> list[Tensor]:
        """σ of the parameters whose state is ``state``, with the numbers ``c`` (floats or
        tensors): plain tensor ops, so the one formula serves sampling, a compiled update's
        training point and a population's stacked state alike."""
        raise NotImplementedError

    def _update(
        self,
        group: Mapping,
        xs: list[Tensor],
        grads: list[Tensor],
        state: StateTensors,
        c: tuple,
        mode: Mode,
    ) -> None:
        """The strategy's rule: one step on ``xs`` (the means μ) and ``state``, in place."""
        raise NotImplementedError

    def _training_point(
        self, group: Mapping, xs: list[Tensor], state: StateTensors, c: tuple
    ) -> list[Tensor]:
        """θ = μ + σ⊙ε from explicit tensors, where a compiled update takes the gradient."""
        stds = self._std(group, state, c)
        return [x + std * e for x, std, e in zip(xs, stds, state["noise"])]

    def _state_tensors(
        self, group: Mapping, params: list[Tensor], states: list[dict], draw: bool = False
    ) -> StateTensors:
        """The state of ``params`` by key, and their ε as ``noise``: zero where none was
        drawn (the gradient was then taken at μ), or drawn now if ``draw``."""
        state = {key: [s[key] for s in states] for key in self._state_keys}
        if draw:
            self._group_noise(group)
        state["noise"] = [s.get("noise", torch.zeros_like(p)) for s, p in zip(states, params)]
        return state

    @skips_non_finite
    @torch.no_grad()
    def step(self, closure: Callable[[], float] | None = None) -> float | None:
        """One update from ``p.grad`` (∇θF at the current sample); no closure needed.

        Parameters whose step counts differ (one skipped an update without a gradient)
        take their own bias corrections: the rule runs once per distinct count.
        """
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if not params:
                continue
            states = [self._init_state(group, p) for p in params]
            for step, idx in advance_steps(states).items():
                xs = [params[i] for i in idx]
                state = self._state_tensors(group, xs, [states[i] for i in idx])
                c = self._coefficients(group, step)
                self._update(group, xs, [x.grad for x in xs], state, c, "eager")
        return None

    def traceable_step(self) -> TraceableStep:
        """This strategy's step for a compiled training graph (``param_explore.traceable``):
        the same :meth:`_update` and :meth:`_coefficients` as :meth:`step`.

        Creates any missing state (moments; ε from the global generator if none was
        drawn yet, so call it after the first :meth:`resample_noise`). Raises
        :class:`UntraceableOptimizerError` for strategies that have no traced form (noisy
        K-FAC watches its layers through module hooks).
        """
        if type(self)._update is WeightSampling._update:
            raise UntraceableOptimizerError(f"{type(self).__name__} has no traced form")
        group = single_group(self)
        params = list(group["params"])
        states = [self._init_state(group, p) for p in params]
        return TraceableStep(
            params,
            self._state_tensors(group, params, states, draw=True),
            states,
            functools.partial(self._coefficients, group),
            functools.partial(self._traced_update, group),
            functools.partial(self._training_point, group),
            group_names(group),
        )

    def _traced_update(
        self, group: Mapping, xs: list[Tensor], grads: list[Tensor], state: StateTensors, c: tuple
    ) -> None:
        self._update(group, xs, grads, state, c, "traced")

    @torch.no_grad()
    def sampling_std(self) -> list[Tensor]:
        """The current σ of every parameter, in ``param_groups`` order (new tensors).

        0 for noise-free strategies and for parameters that are never perturbed."""
        stds = []
        for group in self.param_groups:
            if self.explores and group.get("perturb", True):
                stds.extend(self._group_sampling_std(group))
            else:
                stds.extend(torch.zeros_like(p) for p in group["params"])
        return stds

    @torch.no_grad()
    def exploration_statistics(self) -> dict[str, float]:
        """Scalars describing the exploration now, for logging as ``explore/<key>``.

        Mean, min and max of the marginal σ over the perturbed weights (all 0 for
        noise-free strategies); strategies add what else a user needs to watch. Reads the
        state only.
        """
        groups = self._perturbed_groups()
        if self.explores:
            per_param = [std for group in groups for std in self._group_sampling_std(group)]
        else:
            per_param = [torch.zeros_like(p) for group in groups for p in group["params"]]
        stds = torch.cat([s.flatten() for s in per_param])
        statistics = {
            "sigma_mean": stds.mean().item(),
            "sigma_min": stds.min().item(),
            "sigma_max": stds.max().item(),
        }
        if self.explores:
            statistics.update(sigma_quantiles(stds))
            statistics.update(self._layer_medians(groups, per_param))
        return statistics

    def _layer_medians(self, groups: list[dict], stds: list[Tensor]) -> dict[str, float]:
        """``sigma_median/<layer>``: the median σ of each layer's perturbed weights and
        biases together, a layer being a parameter name's module (``net.0`` of
        ``net.0.weight``); none for an optimizer built from unnamed parameters."""
        names = [name for group in groups for name in group.get("param_names", ())]
        if len(names) != len(stds):
            return {}
        layers: dict[str, list[Tensor]] = {}
        for name, std in zip(names, stds):
            layers.setdefault(name.rpartition(".")[0] or name, []).append(std.flatten())
        return {
            f"sigma_median/{layer}": _quantile(torch.cat(values), 0.5)
            for layer, values in layers.items()
        }

    @torch.no_grad()
    def fresh_sample(self, generator: torch.Generator | None = None) -> dict[str, Tensor]:
        """θ' = μ + σ ⊙ ε' by parameter name, ε' drawn now from ``generator``: a sample of
        the strategy's current distribution that leaves the acting sample, its noise and
        every other state as they are — for measuring what the weight noise does to the
        policy (:func:`param_explore.param_noise.action_space_distance`) with random
        numbers of the measurement's own. The parameters themselves for noise-free
        strategies; correlated strategies (noisy K-FAC) draw from their own covariance."""
        params = self._params()
        if not self.explores:
            return dict(zip(self.param_names(), params, strict=True))
        fresh = [
            torch.randn(p.shape, dtype=p.dtype, device=p.device, generator=generator)
            if self._is_perturbed(p)
            else torch.zeros_like(p)
            for p in params
        ]
        return dict(
            zip(self.param_names(), torch._foreach_addcmul(params, self.sampling_std(), fresh))
        )

    def adapt_noise(
        self,
        actions_at: Callable[[Mapping[str, Tensor] | None], Tensor],
        generator: torch.Generator | None = None,
    ) -> float | None:
        """Adapt the noise scale to the policy's behaviour; a no-op unless the strategy
        adapts (parameter noise). Callers invoke it every :attr:`noise_adaptation_interval`
        environment steps.

        ``actions_at(weights)`` gives the actions, normalised to [−1, 1], of the network
        at ``weights`` (by parameter name; ``None``: at μ) on a minibatch of states the
        caller chose. Returns the measured distance, if any.
        """
        return None

    @torch.no_grad()
    def scale_gradients_(self, factor: float) -> None:
        """Multiply the gradient the coming :meth:`step` uses by ``factor``.

        For a caller whose loss is ``factor`` times smaller than the one the strategy's
        settings assume (SB3's minibatch mean against the paper's sum): ``p.grad``, and
        any statistics a strategy recorded from the same backward pass (noisy K-FAC).
        """
        grads = [p.grad for p in self._params() if p.grad is not None]
        if grads:
            torch._foreach_mul_(grads, factor)


#: The quantiles of σ over the perturbed weights that ``exploration_statistics`` reports.
SIGMA_QUANTILES = {"sigma_q10": 0.1, "sigma_median": 0.5, "sigma_q90": 0.9}


def _quantile(values: Tensor, q: float) -> float:
    """The ``q`` quantile of ``values`` with linear interpolation between order statistics
    (NumPy's default), by sorting: ``torch.quantile`` refuses more than 16 M elements."""
    ordered = values.detach().flatten().double().sort().values
    position = q * (len(ordered) - 1)
    below = int(position)
    above = min(below + 1, len(ordered) - 1)
    weight = position - below
    return float(ordered[below] * (1 - weight) + ordered[above] * weight)


def sigma_quantiles(stds: Tensor) -> dict[str, float]:
    """:data:`SIGMA_QUANTILES` of the σ of every perturbed weight (flattened)."""
    return {name: _quantile(stds, q) for name, q in SIGMA_QUANTILES.items()}


def advance_steps(states: list[dict]) -> dict[int, list[int]]:
    """Increment each state's ``step``; group the indices by the new step count.

    Parameters that skipped steps (no gradient) have their own bias correction, so the
    foreach updates run once per distinct step count — in practice once. The counts are
    read in one copy: a population's (and a compiled run's) live on its device, where
    reading each parameter's would wait for the device once per parameter.
    """
    if not states:
        return {}
    for state in states:
        state["step"] += 1
    buckets: dict[int, list[int]] = {}
    for i, count in enumerate(torch.stack([state["step"] for state in states]).tolist()):
        buckets.setdefault(int(count), []).append(i)
    return buckets


def _coming_step(states: list[dict]) -> int | Tensor:
    """The number of the parameters' coming step (1 before the first): an int from a count
    on the CPU; from a count on an accelerator (a population's or a compiled run's counts
    live there, :mod:`agents.ddpg.stacked_state`) a float64 tensor, computed there: reading
    it would wait for the device, once per action of a sampling strategy."""
    if not states:
        return 1
    count = states[0]["step"]
    if count.device.type == "cpu":
        return int(count) + 1
    return count.double() + 1


def state_by_name(optimizer: torch.optim.Optimizer, saved: dict[str, Any]) -> dict[str, Any]:
    """``saved`` (an optimizer's ``state_dict``) with its state re-indexed so that each of
    ``optimizer``'s parameters gets the state saved under its name; a state saved without
    names (earlier versions) is returned as it is, to be matched by position. A ValueError
    names a parameter the saved state does not have, or a saved one this optimizer lacks.
    """
    saved_groups = saved["param_groups"]
    if not all("param_names" in group for group in saved_groups):
        return saved
    where = {
        name: index
        for group in saved_groups
        for name, index in zip(group["param_names"], group["params"], strict=True)
    }
    names = [group.get("param_names") for group in optimizer.param_groups]
    if any(group is None for group in names):
        return saved
    wanted = [name for group in names for name in group]
    missing = [name for name in wanted if name not in where]
    extra = sorted(set(where) - set(wanted))
    if missing or extra:
        raise ValueError(
            "the saved optimizer state is of other parameters"
            + (f"; missing: {', '.join(missing)}" if missing else "")
            + (f"; not in this network: {', '.join(extra)}" if extra else "")
        )
    if len(saved_groups) != len(names):
        raise ValueError(
            f"the saved optimizer state has {len(saved_groups)} parameter groups, this "
            f"optimizer {len(names)}"
        )
    state, groups, index = {}, [], 0
    for group, current in zip(saved_groups, names):
        ids = []
        for name in current:
            if where[name] in saved["state"]:
                state[index] = saved["state"][where[name]]
            ids.append(index)
            index += 1
        groups.append({**group, "params": ids, "param_names": list(current)})
    return {**saved, "state": state, "param_groups": groups}


class PrecisionSampling(WeightSampling):
    """Strategies whose state holds the precision σ⁻² itself (VadaGrad, the Explore pair).

    Each parameter's precision starts at ``group["initial_precision"]`` and σ = 1/√precision.
    """

    def _init_state(self, group: Mapping, p: Tensor) -> dict:
        state = self.state[p]
        if "precision" not in state:
            state["step"] = torch.tensor(0.0)
            state["precision"] = torch.full_like(
                p, group["initial_precision"], memory_format=torch.preserve_format
            )
        return state

    def _std(self, group: Mapping, state: StateTensors, c: tuple) -> list[Tensor]:
        """σ = 1/√precision."""
        return [torch.rsqrt(p) for p in state["precision"]]


class MomentSampling(WeightSampling):
    """Strategies whose state is Adam's two moments of the gradient, m and v, from zero
    (Vadam's σ reads v; Adam Langevin's drift reads both)."""

    _state_keys = ("exp_avg", "exp_avg_sq")

    def _init_state(self, group: Mapping, p: Tensor) -> dict:
        state = self.state[p]
        if "exp_avg" not in state:
            state["step"] = torch.tensor(0.0)
            state["exp_avg"] = torch.zeros_like(p, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(p, memory_format=torch.preserve_format)
        return state
