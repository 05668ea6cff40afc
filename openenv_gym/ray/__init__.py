"""Env servers on a Ray cluster, and rollouts as Ray tasks (the `openenv-gym[ray]` extra).

    import openenv_gym.ray
    servers = openenv_gym.ray.serve("openenv/echo", num_servers=4, workers_per_server=8)
    envs = gym.make_vec("openenv/echo", num_envs=4096, base_url=servers)    # every live server, as it changes
    ...
    servers.shutdown()
"""

try:
    import ray as _ray  # noqa: F401  (fails here, with the way out, rather than deep in a submodule)
except ImportError as exc:  # pragma: no cover - depends on the install
    raise ImportError("openenv_gym.ray needs Ray: pip install 'openenv-gym[ray]'") from exc

from openenv_gym.ray.rollouts import rollouts
from openenv_gym.ray.servers import EnvServers, serve

__all__ = ["EnvServers", "rollouts", "serve"]
