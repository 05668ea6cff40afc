"""The hosts an environment's code reaches for as it loads, seen through Python's audit hooks (PEP 578): name
lookups, connections, URLs opened, and the URLs of the commands it starts (`git clone https://...`). Loopback is
left out. `adapters/check.py` watches a load with it, so that a load that fails because the network is unreachable
says which host it needed, rather than that the code is broken.

    watch = ReachedHosts.install()   # once per process: an audit hook cannot be removed
    ...                              # load the environment
    watch.hosts                      # {"github.com": "git clone https://github.com/..."}
"""

from __future__ import annotations

import ipaddress
import os
import socket
import subprocess
import sys
from typing import Any
from urllib.error import URLError
from urllib.parse import urlsplit

MAX_HOSTS = 20  # what one load may name (a loop of lookups names each once)
# what the standard library raises where the network fails (a command that fetches: git clone, exits non-zero);
# other clients' errors are known by their names (requests' ConnectionError, httpx's ConnectError, ...)
NETWORK_ERRORS = (ConnectionError, TimeoutError, socket.gaierror, socket.herror, URLError,
                  subprocess.CalledProcessError)
NETWORK_WORDS = ("Connect", "Timeout", "Network", "Resolve", "Unreachable")
# commands that fetch what they do not find (uv a Python, pip a package, git a repository): one that fails as a load
# runs it is taken to have failed for the network, its hosts unknown
FETCHERS = {"git", "curl", "wget", "uv", "uvx", "pip", "pip3", "npm", "npx", "hf", "huggingface-cli"}


def _loopback(host: str) -> bool:
    if host in ("", "localhost", "localhost.localdomain"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_loopback or address.is_unspecified


def _url_host(text: str) -> str | None:
    """The host of a URL (`https://host/...`) or of git's `git@host:path`, else None."""
    if "://" in text:
        return urlsplit(text).hostname
    if text.startswith("git@") and ":" in text:
        return text[4:].split(":", 1)[0]
    return None


class ReachedHosts:
    _installed: ReachedHosts | None = None

    def __init__(self) -> None:
        self.hosts: dict[str, str] = {}  # host -> how the code reached for it, first seen

    @classmethod
    def install(cls) -> ReachedHosts:
        if cls._installed is None:
            cls._installed = cls()
            sys.addaudithook(cls._installed._event)
        return cls._installed

    def _add(self, host: Any, how: str) -> None:
        host = host.decode(errors="replace") if isinstance(host, bytes) else str(host or "")
        if not _loopback(host) and host not in self.hosts and len(self.hosts) < MAX_HOSTS:
            self.hosts[host] = how

    def _event(self, event: str, args: tuple) -> None:
        if event == "socket.getaddrinfo":
            self._add(args[0], f"a lookup of {args[0]}")
        elif event == "socket.connect" and isinstance(args[1], tuple) and args[1]:
            self._add(args[1][0], f"a connection to {args[1][0]}:{args[1][1] if len(args[1]) > 1 else '?'}")
        elif event == "urllib.Request":
            host = _url_host(str(args[0]))
            if host:
                self._add(host, f"a request of {args[0]}")
        elif event == "subprocess.Popen":
            argv = args[1] if isinstance(args[1], list | tuple) else [args[1]]
            for part in map(str, argv):
                host = _url_host(part)
                if host:
                    self._add(host, " ".join(map(str, argv))[:300])

    def unreachable(self, failure: BaseException) -> dict[str, str]:
        """The hosts reached for, if `failure` is what not reaching one raises (a connection or name error, a
        timeout, a command that failed); else, where the failure is a command that fetches (uv finding a Python,
        git, pip, curl) failing, {"": the command}, its hosts unknown; else none."""
        if self.hosts and _network_failure(failure):
            return self.hosts
        failed = next((cause.cmd for cause in causes(failure) if isinstance(cause, subprocess.CalledProcessError)
                       and isinstance(cause.cmd, list | tuple) and cause.cmd
                       and os.path.basename(str(cause.cmd[0])) in FETCHERS), None)
        return {"": " ".join(map(str, failed))[:300]} if failed else {}


def causes(exc: BaseException | None) -> list[BaseException]:
    """An exception and those it was raised from or while handling, innermost last."""
    found: list[BaseException] = []
    while exc is not None and len(found) < 20:
        found.append(exc)
        exc = exc.__cause__ or exc.__context__
    return found


def _network_failure(exc: BaseException) -> bool:
    """Whether an exception (or one it was raised from) is what a client raises when the network fails it."""
    return any(isinstance(cause, NETWORK_ERRORS) or any(word in type(cause).__name__ for word in NETWORK_WORDS)
               for cause in causes(exc))
