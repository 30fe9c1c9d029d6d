"""Thompson sampling through the critic: a held posterior sample of Q moves the acting action.

Why (``docs/decisions.md#variational-critic``): with a posterior over the critic's weights
(:mod:`agents.common.critic_posterior`), acting greedily on one sample Q̃ of it is Thompson
sampling, the principled form of exploration (randomised value functions). DDPG's actor
is deterministic and trained against one critic, so the greedy action of Q̃ is taken to
first order, as Optimistic Actor-Critic (Ciosek et al. 2019) moves its action toward an
upper bound of Q: the action a = μ_φ(s) moves along ∇ₐQ̃(s, a), normalised, by
``critic_shift`` half action ranges, and is clipped to the action space. The actor keeps
training against the critic's mean (its parameters), so evaluation at the posterior mean
is the actor unmoved; ``actor_critic: sample`` trains it against Q̃ instead (LSAC's way).

A sample θ̃ = μ + σ⊙ε is drawn from the member's own generator and held — for an episode
(``critic_hold`` 0, as bootstrapped DQN and RLSVI hold one) or for K steps — as a copy: the
critic's mean moves on under it. For the Langevin sampler, σ = 0 and the sample is a
snapshot of the chain's iterate.

What it measures for the logs (``explore.csv``): how far actions moved and how often the
move was clipped, and the spread of the posterior's Q — the standard deviation of
Q(s, μ_φ(s)) over fresh samples (a posterior's; a chain's: over its last held snapshots, which
mix the chain's drift into the spread) — at replayed states and at states three standard
deviations away from them, where the data says less: does the uncertainty shrink where
data is and stay where it is not?
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable

import torch
from torch import Tensor, nn
from torch.func import functional_call

import param_explore

from ..settings.learners import DDPGSettings

#: Fresh posterior samples (or held snapshots of a chain) the spread of Q is measured over.
SPREAD_SAMPLES = 16
#: How far from a replayed state a "far" state is, in the minibatch's standard deviations.
FAR = 3.0


class ThompsonCritic:
    """A member's held sample of its critic and the acting move it makes (module
    docstring). ``optimizer`` is the critic's posterior (or sampler) over ``critic``'s
    parameters; ``generator`` the member's own, which every draw takes from."""

    def __init__(
        self,
        critic: nn.Module,
        optimizer: torch.optim.Optimizer,
        generator: torch.Generator,
        settings: DDPGSettings,
        weights: list[Tensor],
        moves: Tensor,
    ) -> None:
        """``weights``: where the held sample is kept, a tensor per critic parameter in its
        optimizer's order (a member's rows of its stack's); ``moves``: its (moved,
        clipped, actions) sums, (3,) (its row of its stack's)."""
        self.critic, self.optimizer, self.generator = critic, optimizer, generator
        self.hold, self.shift = settings.critic_hold, settings.critic_shift
        self.actor_follows_sample = settings.actor_critic == "sample"
        #: The critic's parameter names, in its optimizer's order (the update's: a sampled
        #: critic's :func:`~agents.ddpg.update.critic_order`).
        self.names = optimizer.param_names()
        #: The held sample θ̃, in :attr:`names`' order (written in place by :meth:`draw`).
        self.weights = weights
        #: Whether a sample is held (none before the first draw, nor after a resume).
        self.drawn = False
        self._is_posterior = isinstance(optimizer, param_explore.Posterior)
        self._snapshots: deque[list[Tensor]] = deque(maxlen=SPREAD_SAMPLES)
        # (moved, clipped, actions) since the last read, on the device: no sync per step
        self.moves = moves

    # ----------------------------------------------------------------- the sample
    @torch.no_grad()
    def draw(self) -> None:
        """A new held sample θ̃ = μ + σ⊙ε, ε ~ N(0, I) from the member's generator."""
        sample = self._sample(self.generator)
        torch._foreach_copy_(self.weights, sample)
        self.drawn = True
        if not self._is_posterior:
            self._snapshots.append(sample)

    def _sample(self, generator: torch.Generator) -> list[Tensor]:
        """θ = μ + σ⊙ε (a copy, in :attr:`names`' order), ε drawn from ``generator``."""
        params = [p for group in self.optimizer.param_groups for p in group["params"]]
        noises = [
            torch.randn(p.shape, dtype=p.dtype, device=p.device, generator=self.generator)
            for p in params
        ]
        return self.optimizer.posterior_sample(noises)

    def q_value(self, weights: list[Tensor], obs: Tensor, actions: Tensor) -> Tensor:
        """Q(obs, actions) of the critic at ``weights`` (:attr:`names`' order)."""
        return functional_call(self.critic, dict(zip(self.names, weights, strict=True)),
                               (obs, actions))  # fmt: skip

    # ----------------------------------------------------------------- acting
    def moved(self, obs: Tensor, action: Tensor, center: Tensor, scale: Tensor) -> Tensor:
        """``action`` (the actor's, for the networks' ``obs``) moved along the held
        sample's normalised ∇ₐQ̃ by :attr:`shift` half action ranges, clipped to the action
        space (:func:`moved_units`). Drawn first if no sample is held."""
        if not self.drawn:
            self.draw()

        def q_of(units: Tensor) -> Tensor:
            return self.q_value(self.weights, obs, center + scale * units)

        units = (action - center) / scale
        clipped, wanted = moved_units(q_of, units, self.shift)
        count_moves(self.moves, units, clipped, wanted)
        return center + scale * clipped

    # ----------------------------------------------------------------- measurements
    @torch.no_grad()
    def statistics(
        self, obs: Tensor, policy: Callable[[Tensor], Tensor], generator: torch.Generator
    ) -> dict[str, float]:
        """The ``explore/*`` scalars of the critic's sample (module docstring): the mean
        move of the actions since the last call (half action ranges) and the share clipped;
        the spread of Q at the policy's actions for the replayed states ``obs`` (as the
        networks see them) and for states :data:`FAR` standard deviations from them, in
        random directions drawn from ``generator`` (the measurement's own)."""
        moved, clipped, count = self.moves.tolist()
        self.moves.zero_()
        stats: dict[str, float] = {}
        if count:
            stats["critic_action_move"] = moved / count
            stats["critic_move_clipped"] = clipped / count
        signs = torch.randint(0, 2, obs.shape, generator=generator, device=obs.device) * 2 - 1
        far = obs + FAR * obs.std(dim=0, keepdim=True) * signs
        replay, distant = self._spread(obs, policy, generator), self._spread(far, policy, generator)
        if replay is not None and distant is not None:
            stats["critic_spread_replay"] = replay
            stats["critic_spread_far"] = distant
        return stats

    def _spread(
        self, obs: Tensor, policy: Callable[[Tensor], Tensor], generator: torch.Generator
    ) -> float | None:
        """The mean over ``obs`` of the std of Q(s, π(s)) over the posterior's samples
        (fresh ones of a posterior's, the held snapshots of a chain's; None with fewer than
        two)."""
        if self._is_posterior:
            samples = [self._sample(generator) for _ in range(SPREAD_SAMPLES)]
        else:
            samples = list(self._snapshots)
        if len(samples) < 2:
            return None
        actions = policy(obs)
        values = torch.stack([self.q_value(w, obs, actions) for w in samples])
        return float(values.std(dim=0).mean())


def moved_units(
    q_of: Callable[[Tensor], Tensor], units: Tensor, shift: float
) -> tuple[Tensor, Tensor]:
    """Actions ``units`` (in half action ranges about the centre, (…, action dim)) moved by
    ``shift`` along ∇ᵤ of ``q_of`` (Q̃ of the actions in those units), normalised per
    action; a zero gradient moves nothing. Returns the moved actions clipped to [−1, 1], and
    as wanted. Pure tensor code: a single run calls it, a population vmaps it."""
    grad = torch.func.grad(lambda u: q_of(u).sum())(units)
    norm = grad.norm(dim=-1, keepdim=True)
    direction = torch.where(norm > 0, grad / norm.clamp_min(1e-30), torch.zeros_like(grad))
    wanted = units + shift * direction
    return wanted.clamp(-1.0, 1.0), wanted


@torch.no_grad()
def count_moves(moves: Tensor, units: Tensor, clipped: Tensor, wanted: Tensor) -> None:
    """Add to ``moves`` (…, 3) the actions' move, how many were clipped and how many there
    were (a row of actions per leading index of ``moves``)."""
    moved = (clipped - units).norm(dim=-1)
    was_clipped = (clipped != wanted).any(dim=-1).to(moves.dtype)
    count = torch.ones_like(moved)
    if moves.dim() > 1:  # a row per member: each member's own actions summed
        rows = len(moves)
        moved, was_clipped, count = (
            x.reshape(rows, -1).sum(1) for x in (moved, was_clipped, count)
        )
    else:
        moved, was_clipped, count = moved.sum(), was_clipped.sum(), count.sum()
    moves += torch.stack([moved, was_clipped, count], dim=-1)
