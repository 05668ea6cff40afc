"""The environment an episode's program inherits from the server: the server's own, less what is secret or the
server's alone (a model provider's key, the server's bearer token, a cloud's credentials, openenv-gym's settings),
so that a program, and whatever a policy makes it print, never holds them."""

from __future__ import annotations

import os
import re

SECRET = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|SESSION|COOKIE|PRIVATE", re.IGNORECASE)
SERVERS_OWN = ("OPENENV_GYM_",)  # its home, venvs, token, settings: the server's, never an episode's


def inherited_environ() -> dict[str, str]:
    return {name: value for name, value in os.environ.items()
            if not SECRET.search(name) and not name.startswith(SERVERS_OWN)}
