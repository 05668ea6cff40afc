"""Whether this machine can sandbox episodes, and if not, why: bubblewrap must be installed and able to make the
namespaces (it is tried once per process), and the server must be root: on the host, in a container, or in a user
namespace of its own, which `openenv-gym serve` makes for a server an ordinary user runs (userns.py)."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess

from openenv_gym.sandbox.userns import REFUSED

BWRAP = "bwrap"
INSTALL = "install bubblewrap (Debian and Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap)"
NO_SANDBOX = "--no-sandbox"


@functools.cache
def unavailable() -> str | None:
    """None if episodes can be sandboxed here; else what is missing, and what to do."""
    if shutil.which(BWRAP) is None:
        return f"bubblewrap ({BWRAP}) is not installed: {INSTALL}"
    if os.geteuid() != 0:
        why = os.environ.get(REFUSED)
        return ("the server runs as an ordinary user, outside a user namespace of its own" +
                (f" (the kernel refused one: {why})" if why else "") +
                ", and only root can make an episode's namespaces: serve it with `openenv-gym serve`, which starts "
                "the server in a user namespace where the kernel allows them (see docs/reliability.md), or as root")
    trial = subprocess.run([BWRAP, "--ro-bind", "/", "/", "--unshare-pid", "--unshare-net", "--unshare-ipc",
                            "--unshare-uts", "--hostname", "sandbox", "--die-with-parent", "true"],
                           capture_output=True, text=True, timeout=30)
    if trial.returncode != 0:
        said = trial.stderr.strip().splitlines()[-1] if trial.stderr.strip() else f"exit code {trial.returncode}"
        return (f"bubblewrap cannot make the sandbox's namespaces here ({said}): the kernel or the container "
                "forbids them (a container's seccomp profile must allow unshare, mount, setns and sethostname: see "
                "docs/scaling.md)")
    return None


def refusal(what: str) -> str | None:
    """Why `what` (an environment that runs programs) cannot be served sandboxed here, naming the way out."""
    reason = unavailable()
    if reason is None:
        return None
    return (f"{what} runs programs, and every episode's program runs in a sandbox of its own, which this machine "
            f"cannot make: {reason}. To run it unconfined anyway (its programs then see the server's files, network "
            f"and processes), serve it with {NO_SANDBOX} (gym.make's local server, without base_url: "
            f"gym.make(..., sandbox=False))")
