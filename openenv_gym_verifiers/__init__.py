"""openenv_gym's environments as a Verifiers v1 taskset (verifiers 0.4), so that Verifiers' own env server serves
every kind we serve, and prime-rl trains on it.

    [orchestrator.train.source.env.taskset]
    id = "openenv_gym_verifiers"
    url = "ws://127.0.0.1:8000"   # an openenv-gym server of the environment

A task is the reset options of one task of the server's catalog (`{"split": ..., "index": ...}`); a run plays one
episode in a session of that server, the env playing the user: its observations are the user's (or tool's) turns,
each model reply its action, and its return the trace's reward (env.py). The model is called in process, through
Verifiers' interception, which records the trace (harness.py): no program is started per turn.

Only importable where verifiers 0.4 is installed: `openenv-gym serve ENV --verifiers-port P` runs Verifiers' own
server on this taskset in such a venv (serve.py).
"""

from openenv_gym_verifiers.env import OpenEnvGymEnv, OpenEnvGymEnvConfig
from openenv_gym_verifiers.harness import PolicyCall, PolicyCallConfig
from openenv_gym_verifiers.taskset import OpenEnvGymConfig, OpenEnvGymData, OpenEnvGymTask, OpenEnvGymTaskset

__all__ = ["OpenEnvGymConfig", "OpenEnvGymData", "OpenEnvGymEnv", "OpenEnvGymEnvConfig", "OpenEnvGymTask",
           "OpenEnvGymTaskset", "PolicyCall", "PolicyCallConfig"]
