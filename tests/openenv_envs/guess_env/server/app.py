"""The OpenEnv server of the guess environment: uvicorn server.app:app (from this folder)."""

import os

from openenv.core.env_server.http_server import create_app
from openenv.core.env_server.mcp_types import CallToolAction, CallToolObservation

try:
    from .guess_environment import GuessEnvironment
except ImportError:
    from server.guess_environment import GuessEnvironment

app = create_app(GuessEnvironment, CallToolAction, CallToolObservation, env_name="guess_env",
                 max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "64")))
