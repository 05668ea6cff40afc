"""OpenEnv's server of the echo environment: uvicorn server.app:app (from this folder)."""

import os

from openenv.core.env_server.http_server import create_app

try:
    from ..models import EchoAction, EchoObservation
    from .echo_environment import EchoEnvironment
except ImportError:
    from models import EchoAction, EchoObservation
    from server.echo_environment import EchoEnvironment

app = create_app(EchoEnvironment, EchoAction, EchoObservation, env_name="openenv_echo",
                 max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "1")))
