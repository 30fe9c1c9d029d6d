"""Observation normalisation as Plappert et al.'s DDPG ran it (``normalize_observations``).

OpenAI baselines (``baselines/ddpg/`` at 8b3a6c2, ``docs/decisions.md#observation-normalisation``)
feeds every network — actor and critic, their targets, the perturbed actors of parameter
noise — (s − mean) / std clipped to ±5 (``ddpg.py`` l.14-17, l.106-109, l.127-132, l.157,
l.164), with mean and std the running statistics of every observation the agent has stored
as a transition's s (``store_transition``, l.274-278, after the transition is stored).
Returns are not normalised (``main.py`` l.89: off).

The statistics are those of baselines' ``RunningMeanStd`` (``common/mpi_running_mean_std.py``
l.4-43): float64 sums that start from a prior of count 0.01 and Σx² = 0.01 (so the first
std is 1), mean = Σx / n and std = √max(Σx²/n − mean², 0.01), both in float32 (l.25-26).

The replay buffer keeps raw observations, as baselines' memory does (l.276): a minibatch is
normalised by the statistics of the moment it is drawn, not of the moment it was stored, so
early transitions are not frozen in the scale of a few first observations, and the
curiosity bonus and a saved buffer see the task's own observations.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

#: ``observation_range=(-5., 5.)`` (``ddpg.py`` l.66): normalised observations are clipped.
OBSERVATION_CLIP = 5.0
#: ``RunningMeanStd(epsilon=1e-2)``: the sums' starting count and Σx² (l.6-22).
PRIOR_COUNT = 1e-2
#: The variance's floor (l.26): std ≥ 0.1 whatever the observations.
MIN_VARIANCE = 1e-2


def normalized_observations(obs: Tensor, mean: Tensor, std: Tensor) -> Tensor:
    """(s − mean) / std, clipped to ±:data:`OBSERVATION_CLIP` (``ddpg.py`` l.106-109)."""
    return ((obs - mean) / std).clamp(-OBSERVATION_CLIP, OBSERVATION_CLIP)


class ObservationStatistics:
    """Running mean and std of the observations one member stored, in float64 on the
    training device: its row of a :class:`StackedObservationStatistics` (a stack of one for a
    learner on its own, :meth:`alone`).

    ``mean`` and ``std`` are float32 tensors on the training device, updated in place by
    :meth:`update`: the compiled update reads them as inputs of its graph, so they keep
    their identity for the agent's lifetime (loading a checkpoint copies into them too).
    """

    def __init__(self, stack: StackedObservationStatistics, row: int) -> None:
        self._stack, self._row = stack, row
        # views of the stack's row, written in place
        self.sum, self.sumsq = stack.sum[row], stack.sumsq[row]
        self.count = stack.count[row]
        self.mean, self.std = stack.mean[row], stack.std[row]

    @classmethod
    def alone(cls, obs_dim: int, device: torch.device | str = "cpu") -> ObservationStatistics:
        """The statistics of a learner on its own: a stack of one."""
        return StackedObservationStatistics(1, obs_dim, device).row(0)

    def update(self, obs: np.ndarray | Tensor) -> None:
        """Add one observation (or a batch of them, one per row)."""
        x = _float64(obs, self.sum.device).reshape(-1, self.sum.shape[0])
        self.sum += x.sum(dim=0)
        self.sumsq += x.square().sum(dim=0)
        self.count += len(x)
        self._stack.publish()

    def normalize(self, obs: Tensor) -> Tensor:
        """``obs`` as the networks see it."""
        return normalized_observations(obs, self.mean, self.std)

    def state_dict(self) -> dict[str, Tensor]:
        """The sums, as tensors on the host (a checkpoint is data only)."""
        return {
            "sum": self.sum.cpu().clone(),
            "sumsq": self.sumsq.cpu().clone(),
            "count": self.count.cpu().clone(),
        }

    def load_state_dict(self, state: dict[str, Tensor]) -> None:
        sums = [_float64(state[key], self.sum.device) for key in ("sum", "sumsq")]
        if any(x.shape != self.sum.shape for x in sums):
            shape = tuple(sums[0].shape)
            raise ValueError(
                f"observation statistics of shape {shape}, not {tuple(self.sum.shape)}"
            )
        self.sum.copy_(sums[0])
        self.sumsq.copy_(sums[1])
        self.count.fill_(float(state["count"]))
        self._stack.publish()


class StackedObservationStatistics:
    """The observation statistics of N members as (N, obs dim) float64 tensors on the
    training device, updated with every member's observation of a step at once (one pass
    over the stack, not one per member, and on a GPU no copy to the host). Its rows
    (:meth:`row`) are the members' :class:`ObservationStatistics`; ``mean`` and ``std``
    (N, obs dim) are what a population's batched update and acting read."""

    def __init__(self, members: int, obs_dim: int, device: torch.device | str = "cpu") -> None:
        wide = {"dtype": torch.float64, "device": device}
        self.sum = torch.zeros((members, obs_dim), **wide)
        self.sumsq = torch.full((members, obs_dim), PRIOR_COUNT, **wide)
        self.count = torch.full((members,), PRIOR_COUNT, **wide)
        self.mean = torch.zeros((members, obs_dim), dtype=torch.float32, device=device)
        self.std = torch.ones((members, obs_dim), dtype=torch.float32, device=device)
        self.publish()

    def row(self, k: int) -> ObservationStatistics:
        """Member ``k``'s statistics: views of its row."""
        return ObservationStatistics(self, k)

    def update(self, obs: np.ndarray | Tensor, rows: np.ndarray | None = None) -> None:
        """Add each member's observation (``obs``: a row per member), of the members whose
        ``rows`` are True only if given."""
        x = torch.as_tensor(obs, dtype=torch.float64, device=self.sum.device)
        x = x.reshape(self.sum.shape)
        if rows is None:
            self.sum += x
            self.sumsq += x * x
            self.count += 1
            self.publish()
            return
        index = torch.as_tensor(np.flatnonzero(rows), device=self.sum.device)
        x = x[index]
        self.sum.index_add_(0, index, x)
        self.sumsq.index_add_(0, index, x.square())
        self.count.index_add_(0, index, torch.ones_like(index, dtype=torch.float64))
        self.publish()

    def publish(self) -> None:
        """mean and std from the sums, in float32 as ``RunningMeanStd`` computes them, every
        row (a row whose sums did not change gets the values it had), in place."""
        count = self.count[:, None]
        self.mean.copy_(self.sum / count)  # the float64 quotient rounded to float32
        self.std.copy_(self.sumsq / count)
        self.std -= self.mean * self.mean
        self.std.clamp_min_(MIN_VARIANCE).sqrt_()


def _float64(values: np.ndarray | Tensor, device: torch.device) -> Tensor:
    return torch.as_tensor(values, dtype=torch.float64, device=device)
