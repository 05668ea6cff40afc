"""OpenEnv's server of the tally environment: uvicorn server.app:app (from this folder)."""

import os

from openenv.core.env_server.http_server import create_app

try:
    from ..models import TallyAction, TallyObservation, TallyState
    from .tally_environment import TallyEnvironment
except ImportError:
    from models import TallyAction, TallyObservation, TallyState
    from server.tally_environment import TallyEnvironment

app = create_app(TallyEnvironment, TallyAction, TallyObservation, env_name="tally_env", state_cls=TallyState,
                 max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "8")))
