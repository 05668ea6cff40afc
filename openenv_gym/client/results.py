"""Results of vector steps and resets: the VectorResult type, and how results are joined."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from openenv_gym.errors import OpenEnvGymError

STEP, RESET = 0, 1  # what an answer answers


@dataclass
class VectorResult:
    """Answers for a set of envs, in the order of `ids`. Failed envs are in `errors` (and info["error"])."""

    ids: np.ndarray
    obs: list[str]
    rewards: np.ndarray
    terminated: np.ndarray
    truncated: np.ndarray
    infos: list[dict[str, Any]]
    errors: dict[int, OpenEnvGymError] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)


def joined(parts: list[VectorResult], envs: list[int]) -> VectorResult:
    """Results for disjoint sets of envs, joined into one ordered like `envs`."""
    ids = [env for part in parts for env in part.ids.tolist()]
    position = {env: k for k, env in enumerate(ids)}
    index = [position[env] for env in envs]
    obs = [o for part in parts for o in part.obs]
    infos = [i for part in parts for i in part.infos]
    errors = {env: error for part in parts for env, error in part.errors.items()}
    return VectorResult(np.asarray(envs, dtype=np.int64), [obs[k] for k in index],
                        np.concatenate([part.rewards for part in parts])[index],
                        np.concatenate([part.terminated for part in parts])[index],
                        np.concatenate([part.truncated for part in parts])[index], [infos[k] for k in index], errors)

