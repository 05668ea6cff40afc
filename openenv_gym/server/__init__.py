"""The session server: `openenv_gym.serve("echo")`, or `openenv-gym serve echo` on the command line.

- config.py:     what a server is started with, and its defaults;
- launch.py:     serve(): the environment's venv, the ready report, the worker processes;
- supervisor.py: worker processes sharing one port; worker.py: one of them, its sockets and front ends;
- core.py:       the session core: sessions, episodes, limits, timeouts, reaping, batch steps (no wire format);
- native.py:     the native protocol front end; http.py: the plain HTTP routes;
- batch.py: many sessions stepped at once, answered in columns;
- sessions.py, blocking.py, catalog.py: what the core and the front ends are built from.
"""

from openenv_gym.server.config import Limits, ServeConfig
from openenv_gym.server.launch import serve

__all__ = ["Limits", "ServeConfig", "serve"]
