"""Clients: the async multiplexed connection and its sessions."""

from openenv_gym.client.connection import Connection, Session, connect

__all__ = ["Connection", "Session", "connect"]
