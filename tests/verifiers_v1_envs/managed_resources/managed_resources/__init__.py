from verifiers.v1.tasksets.nemo_gym import NeMoGymEnv

from managed_resources.taskset import ManagedResourcesTaskset

__all__ = ["ManagedResourcesTaskset", "NeMoGymEnv"]
