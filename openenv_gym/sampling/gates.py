"""Gates: which finished groups go to the trainer. A gate takes a group's rewards and says whether to keep it."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from openenv_gym.sampling.base import SIGNAL_TOLERANCE, has_signal


@dataclass(frozen=True)
class ZeroSignalGate:
    """Drops a group whose members all scored the same (within `tolerance`): its advantages are all 0."""

    tolerance: float = SIGNAL_TOLERANCE

    def __call__(self, rewards: Sequence[float]) -> bool:
        return has_signal(rewards, self.tolerance)


@dataclass(frozen=True)
class RewardRangeGate:
    """Keeps a group whose mean reward lies in [low, high]."""

    low: float = 0.0
    high: float = 1.0

    def __call__(self, rewards: Sequence[float]) -> bool:
        return self.low <= sum(rewards) / len(rewards) <= self.high
