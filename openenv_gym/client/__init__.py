"""Clients of servers, through one seam (transport.py): a Transport is one server in one wire format.

- native.py:     openenv_gym servers (connection.py: the multiplexed WebSocket connection; handshake.py:
                 opening one, `connect()`);
- ors.py:        ORS HTTP+SSE servers;
- vector.py:     AsyncVectorClient, N sessions over any transport; results.py: its results;
- transports.py: the transports by name; local.py: local servers for the embedded default;
- sync.py:       calling all of it from synchronous code (the Gymnasium face).
"""

from openenv_gym.client.connection import Connection
from openenv_gym.client.handshake import connect
from openenv_gym.client.session import Session

__all__ = ["Connection", "Session", "connect"]
