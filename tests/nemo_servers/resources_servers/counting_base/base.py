"""A base for servers to derive from, not a server (as NeMo Gym's resources_servers/gymnasium is one): its class has
an abstract method, and its config runs this file. An import of the checkout leaves it out."""

from abc import abstractmethod

from nemo_gym.base_resources_server import SimpleResourcesServer


class CountingServer(SimpleResourcesServer):
    @abstractmethod
    def limit(self) -> int:
        """The most a count may reach."""
