"""TRL's GRPOTrainer over openenv_gym envs (`pip install 'openenv-gym[trl]'`).

- `environment_factory(env_id)`: a class for `GRPOTrainer(environment_factory=...)`, one session per instance;
- `make_rollout_func(env_id)`: a `rollout_func` that plays the whole batch's episodes at once, with `env_reward`,
  the reward function that reads their returns;
- `dataset(size)`: a train dataset whose rows name their tasks;
- `spec(env_id)`: the three at once (`.train_dataset`, `.environment_factory`, `.reward_funcs`), as TRL's
  `OpenRewardSpec`;
- `close_sessions()`: end every session now (done for you when training ends and at exit).
"""

try:
    import transformers  # noqa: F401
    import trl  # noqa: F401
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError(f"openenv_gym.integrations.trl needs TRL: pip install 'openenv-gym[trl]' ({exc})") from exc

from openenv_gym.integrations.trl.factory import close_sessions, environment_factory
from openenv_gym.integrations.trl.rollout_func import env_reward, make_rollout_func
from openenv_gym.integrations.trl.spec import EnvSpec, spec
from openenv_gym.integrations.trl.tasks import dataset

__all__ = ["EnvSpec", "close_sessions", "dataset", "env_reward", "environment_factory", "make_rollout_func", "spec"]
