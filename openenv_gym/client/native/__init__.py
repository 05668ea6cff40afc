"""The native transport family: openenv_gym's own protocol (docs/protocol.md) over multiplexed WebSockets.

- transport.py:  NativeTransport, the Transport of openenv_gym servers (many sessions per connection, a few
                 connections per worker process, one batch frame per connection);
- connection.py: Connection, one multiplexed WebSocket connection; batches.py: its blocks of requests;
- session.py:    Session, one session over a Connection;
- handshake.py:  `connect()`, opening a Connection (the URL, the token, what a refused handshake means);
- resume.py:     the Connection's reader, which reconnects and resumes the sessions when the socket drops.
"""
