"""The session server: `serve(ServeConfig(env="echo"))`, or `openenv-gym serve echo` on the command line."""

from openenv_gym.server.dispatch import Limits
from openenv_gym.server.supervisor import serve
from openenv_gym.server.worker import ServeConfig

__all__ = ["Limits", "ServeConfig", "serve"]
