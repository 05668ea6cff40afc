"""Where a vector client's servers are: a fixed list of URLs, a DNS name that stands for every address it
resolves to (a Kubernetes headless Service), or any object with a `urls()` method (openenv_gym.ray's handle).

    AsyncVectorClient(["ws://10.0.0.5:8000", "ws://10.0.0.6:8000"], 1024)
    AsyncVectorClient("dns+ws://envs.default.svc.cluster.local:8000", 1024)   # every pod behind the Service
    AsyncVectorClient(openenv_gym.ray.serve("openenv/echo", num_servers=4), 1024)

The client asks its source again when it loses a server, and connects to the servers it does not know yet.
"""

from __future__ import annotations

import itertools
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable
from urllib.parse import urlsplit, urlunsplit

from openenv_gym.errors import ServerUnreachableError

DNS_PREFIX = "dns+"


@runtime_checkable
class ServerSource(Protocol):
    def urls(self) -> list[str]:
        """The URLs of the servers that serve now. May block (it is called in a thread)."""
        ...


Servers = str | Sequence[str] | ServerSource  # what `base_url` may be


@dataclass(frozen=True)
class FixedServers:
    """The same URLs always: a server lost is asked for again at the same URL (it may come back there)."""

    listed: tuple[str, ...]

    def urls(self) -> list[str]:
        return list(self.listed)


@dataclass(frozen=True)
class DnsServers:
    """`dns+ws://NAME:PORT`: one server per address NAME resolves to (A and AAAA records), each on PORT."""

    url: str  # ws://NAME:PORT, without the prefix

    def urls(self) -> list[str]:
        parts = urlsplit(self.url)
        if not parts.hostname or parts.port is None:
            raise ValueError(f"{DNS_PREFIX}{self.url} needs a host name and a port, as in "
                             f"{DNS_PREFIX}ws://envs.default.svc.cluster.local:8000")
        try:
            found = socket.getaddrinfo(parts.hostname, parts.port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ServerUnreachableError(
                f"{parts.hostname} does not resolve ({exc.strerror}); check the Service name and its namespace, "
                "and that the client runs where cluster DNS answers") from exc
        addresses = sorted({str(entry[4][0]) for entry in found})
        return [urlunsplit(parts._replace(netloc=f"[{address}]:{parts.port}" if ":" in address
                                          else f"{address}:{parts.port}")) for address in addresses]


_turns = itertools.count()


def one_of(source: ServerSource) -> str:
    """One server of the source for a single session: each call the next one, so single envs spread too."""
    urls = source.urls()
    if not urls:
        raise ServerUnreachableError(f"{source!r} lists no server; start one, or wait until one is ready")
    return urls[next(_turns) % len(urls)]


def server_source(servers: Servers) -> ServerSource:
    """The source `base_url` names: a URL, a list of them, a `dns+` URL, or a source already."""
    if isinstance(servers, str):
        return DnsServers(servers[len(DNS_PREFIX):]) if servers.startswith(DNS_PREFIX) else FixedServers((servers,))
    if isinstance(servers, ServerSource):
        return servers
    listed = tuple(servers)
    if len(listed) == 1 and isinstance(listed[0], str):  # a command line's one --env-url, say
        return server_source(listed[0])
    if not listed or not all(isinstance(url, str) and not url.startswith(DNS_PREFIX) for url in listed):
        raise ValueError(f"base_url must be a URL, a list of URLs, one {DNS_PREFIX} URL or an object with urls(); "
                         f"got {servers!r}")
    return FixedServers(listed)
