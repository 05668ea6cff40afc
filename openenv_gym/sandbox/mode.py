"""What this server's sandboxes are, and what bounds them, in one line (printed when a server that sandboxes
starts, and by `openenv-gym doctor`):

    sandbox: root (each episode a uid of its own); control groups v1: each episode's memory and processes bounded

Run alone (`python -m openenv_gym.sandbox.mode`), it prints that line's facts as JSON: `doctor` runs it in the user
namespace a server would start in (userns.py), to say what that server would have.
"""

from __future__ import annotations

import json
import os

from openenv_gym.sandbox import cgroups
from openenv_gym.sandbox.sandbox import shares_uid
from openenv_gym.sandbox.support import unavailable
from openenv_gym.sandbox.userns import REFUSED


def facts() -> dict[str, object]:
    """{"sandbox": its mode or None, "reason": why none, "cgroups": "v1" | "v2" | None}"""
    reason = unavailable()
    with open("/proc/self/uid_map") as file:
        host = file.read().split() == ["0", "0", "4294967295"]
    if reason is not None:
        sandbox = None
    elif host:
        sandbox = "root"
    else:
        sandbox = "user namespace, one uid shared" if shares_uid() else "user namespace, a uid per episode"
    found = cgroups.writable_hierarchies()
    version = None if not found else "v2" if (found[0] / "cgroup.subtree_control").exists() else "v1"
    delegated = bool(found) and found[0] not in (cgroups.ROOT, cgroups.ROOT / "pids")
    return {"sandbox": sandbox, "reason": reason, "cgroups": version, "delegated": delegated,
            "userns_refused": os.environ.get(REFUSED)}


def describe(found: dict[str, object] | None = None) -> str:
    """The one line, from facts() (this process's, by default)."""
    found = found or facts()
    sandbox = {None: f"none ({found['reason']})",
               "root": "root (each episode a uid of its own)",
               "user namespace, a uid per episode": "a user namespace of the server's, with subordinate uids (each "
                                                    "episode a uid of its own)",
               "user namespace, one uid shared": "a user namespace of the server's that maps only its user's uid (no "
                                                 "subordinate uids in /etc/subuid): every episode shares it, each in "
                                                 "namespaces of its own"}[found["sandbox"]]  # type: ignore[index]
    if found["cgroups"]:
        bounds = (f"control groups {found['cgroups']}{' (delegated)' if found['delegated'] else ''}: each "
                  "episode's memory and processes bounded together")
    else:
        bounds = ("no control group the server may write: memory bounded per process (RLIMIT_DATA), not per episode; "
                  "processes per episode (RLIMIT_NPROC)")
    return f"sandbox: {sandbox}; {bounds}"


if __name__ == "__main__":
    print(json.dumps(facts()))
