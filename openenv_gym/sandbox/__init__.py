"""Sandboxes: every episode that runs programs runs them in one of its own, made of the kernel's mechanisms through
bubblewrap (namespaces, mounts) and control groups, never of a home-made chroot.

An episode's sandbox sees the host's root read-only, with the server's homes, caches and temporary files, other
users' and other episodes' files hidden; its environment's folder and venv read-only; a working directory and a
/tmp of its own, size-bounded, gone with it. Its processes have their own PID namespace (they see and signal only
each other), an unprivileged uid of the episode's own, no network but their session's model endpoint (unless the
environment says otherwise), and bounds on processes and memory (the episode's control group), CPU time, open files
and file sizes (each process's rlimits). Programs still start warm: forked from a process that imported what they
need, then moved in (enter.py), no new interpreter per episode.
"""

from openenv_gym.sandbox import pool
from openenv_gym.sandbox.enter import Entry, enter, warm_up
from openenv_gym.sandbox.mounts import WORKDIR
from openenv_gym.sandbox.policy import NETWORKS, Network, SandboxPolicy
from openenv_gym.sandbox.sandbox import Sandbox, live_sandboxes
from openenv_gym.sandbox.support import refusal, unavailable

__all__ = ["NETWORKS", "WORKDIR", "Entry", "Network", "Sandbox", "SandboxPolicy", "enter", "live_sandboxes", "pool",
           "refusal", "unavailable", "warm_up"]
