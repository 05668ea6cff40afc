"""Which task each group plays: task samplers with RFC 013's interface (sample, update, state_dict, metrics).

    sampler = CurriculumSampler(catalog("openenv/verifiers-x"), group_size=8, seed=0)
    for options in sampler.sample(64):          # reset options, one task each: {"split": ..., "index": ...}
        ...                                     # play a group of 8 on it
        sampler.update(options, rewards)        # its 8 rewards: the curriculum learns where the signal is
    sampler.metrics()["signal_groups_per_episode"]
"""

from openenv_gym.sampling.base import TaskSampler, catalog
from openenv_gym.sampling.gates import RewardRangeGate, ZeroSignalGate
from openenv_gym.sampling.samplers import (
    SAMPLERS,
    CurriculumSampler,
    DifficultyPoolSampler,
    SequentialSampler,
    UniformSampler,
)
from openenv_gym.sampling.shared import ServerSampler

GATES = {"zero-signal": ZeroSignalGate}

__all__ = ["GATES", "SAMPLERS", "CurriculumSampler", "DifficultyPoolSampler", "RewardRangeGate", "SequentialSampler",
           "ServerSampler", "TaskSampler", "UniformSampler", "ZeroSignalGate", "catalog"]
