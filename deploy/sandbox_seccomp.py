"""The seccomp profile a container needs for its server to sandbox episodes as an ordinary user: a container
engine's own default profile, with the system calls that make a sandbox allowed (a user namespace and the others,
bubblewrap's mounts and its root, joining them, naming the sandbox's host). Nothing else changes: whatever the
default refuses (the kernel's keyrings, bpf, perf_event_open, ...) stays refused.

    python deploy/sandbox_seccomp.py > sandbox-seccomp.json   # from Podman's default (containers-common)
    python deploy/sandbox_seccomp.py OTHER_DEFAULT.json > sandbox-seccomp.json
    docker run --user 1000 --security-opt seccomp=sandbox-seccomp.json --security-opt systempaths=unconfined ...

The default profile is read where it is installed (containers-common: /usr/share/containers/seccomp.json, the one
Podman uses, and which Docker's default matches), not shipped here.
"""

from __future__ import annotations

import json
import sys

DEFAULT = "/usr/share/containers/seccomp.json"
SANDBOX = ("unshare", "clone", "setns", "mount", "umount2", "pivot_root", "sethostname")


def sandbox_profile(default: dict) -> dict:
    """`default` (an engine's profile), with the sandbox's calls allowed whatever the container's capabilities: the
    rules that name them (a refusal without CAP_SYS_ADMIN, a filter on clone's flags) lose them first, since a call
    may have one action."""
    rules = []
    for rule in default["syscalls"]:
        names = [name for name in rule["names"] if name not in SANDBOX]
        if names:
            rules.append({**rule, "names": names})
    rules.append({"names": list(SANDBOX), "action": "SCMP_ACT_ALLOW", "args": [], "comment":
                  "openenv-gym: its sandbox's namespaces, mounts and root (deploy/sandbox_seccomp.py)"})
    return {**default, "syscalls": rules}


def main() -> None:
    with open(sys.argv[1] if len(sys.argv) > 1 else DEFAULT) as file:
        print(json.dumps(sandbox_profile(json.load(file)), indent=1))


if __name__ == "__main__":
    main()
