"""Clients of servers, through one seam (transport.py): a Transport is one server in one wire format.

- native/:       openenv_gym servers (its own folder: the multiplexed WebSocket connection, `connect()`, sessions,
                 resuming a dropped socket);
- ors.py:        ORS HTTP+SSE servers; openenv.py: OpenEnv servers' /ws; probe.py: whichever a server speaks;
- vector.py:     AsyncVectorClient, N sessions over any transport (fleet.py: which server each sits on;
                 retries.py: resets tried again); results.py: its results; servers.py: where the servers are;
- transports.py: the transports by name; local.py: local servers for the embedded default;
- sync.py:       calling all of it from synchronous code (the Gymnasium face).
"""

from openenv_gym.client.native.connection import Connection
from openenv_gym.client.native.handshake import connect
from openenv_gym.client.native.session import Session

__all__ = ["Connection", "Session", "connect"]
