"""Draws the text it is given with figlet, a program its image installs (apt-get) and no Python venv can hold; the
episode scores 1 when the text is the goal."""

import subprocess
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

from ..models import BannerAction, BannerObservation

GOAL = "7"


class BannerEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self):
        self._state = State(episode_id=str(uuid4()), step_count=0)

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return BannerObservation(banner=f"draw {GOAL} as a banner")

    def step(self, action: BannerAction):
        self._state.step_count += 1
        drawn = subprocess.run(["figlet", action.text], capture_output=True, text=True, check=True).stdout
        return BannerObservation(banner=drawn, reward=float(action.text == GOAL), done=True)

    @property
    def state(self):
        return self._state
