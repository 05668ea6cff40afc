"""managed-resources: a NeMo Gym taskset as Verifiers publishes them (nemo_gym_weather's shape): its env,
NeMoGymEnv, starts the resource server named here in a runtime of its own and reaches it by its port on the host,
unless `resources_url` names one that runs already."""

from pathlib import Path

import verifiers.v1 as vf
from verifiers.v1.tasksets.nemo_gym import NeMoGymConfig, NeMoGymTask, NeMoGymTaskset


class ManagedResourcesConfig(NeMoGymConfig):
    dataset: Path = Path(__file__).with_name("rows.jsonl")


class ManagedResourcesTaskset(NeMoGymTaskset, vf.Taskset[NeMoGymTask, ManagedResourcesConfig]):
    resource_server = "resources_servers.tally.app:TallyResourcesServer"
