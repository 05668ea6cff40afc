"""An ordinary user to run a server as, for the tests and benchmarks of unprivileged mode (run as root): the user
made (useradd), its subordinate uids granted or taken away, and a venv it can read, made from /usr/bin/python3 (the
suite's own interpreter lives under /root, which the user cannot read) with openenv_gym installed from this
checkout.

    user = ensure_user("openenv-subuid", subordinate="200000:65536")
    venv = user_venv(folder)                      # folder/venv, readable by every user
    done = run_as(user.pw_name, [str(venv / "bin" / "python"), ...], {"OPENENV_GYM_HOME": ...}, cwd=folder)
"""

from __future__ import annotations

import os
import pwd
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SYSTEM_PYTHON = "/usr/bin/python3"


def ensure_user(name: str, subordinate: str | None) -> pwd.struct_passwd:
    """User `name` (made if missing), granted the subordinate uids and gids `subordinate` ("first:count"), or none."""
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", name], check=True, capture_output=True)
    for table in (Path("/etc/subuid"), Path("/etc/subgid")):
        lines = [line for line in table.read_text().splitlines() if not line.startswith(f"{name}:")] \
            if table.exists() else []
        table.write_text("".join(f"{line}\n" for line in lines + [f"{name}:{subordinate}"] * bool(subordinate)))
    return pwd.getpwnam(name)


def readable_by_all(folder: Path) -> None:
    """`folder` and what it holds readable by every user, and the folders above it traversable."""
    for parent in folder.parents:
        parent.chmod(parent.stat().st_mode | 0o711)
    subprocess.run(["chmod", "-R", "a+rX", str(folder)], check=True)


def user_venv(folder: Path) -> Path:
    """folder/venv: a venv of /usr/bin/python3 with openenv_gym installed (not editable: the checkout may be where
    the user cannot read), readable by every user."""
    venv = folder / "venv"
    uv = str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "venv", "--quiet", "--python", SYSTEM_PYTHON, str(venv)], check=True)
    subprocess.run([uv, "pip", "install", "--quiet", "--python", str(venv / "bin" / "python"), str(ROOT)], check=True)
    readable_by_all(venv)
    return venv


def run_as(name: str, command: Sequence[str], environment: dict[str, str], prefix: Sequence[str] = (),
           timeout: float = 600, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """`command` run as user `name`, in a clean environment (its HOME, this PATH, and `environment`), after the
    shell commands `prefix` (moving itself into a control group, say)."""
    user = pwd.getpwnam(name)
    variables = {"HOME": user.pw_dir, "PATH": os.environ["PATH"], **environment}
    script = "; ".join([*prefix, 'exec "$@"'])
    return subprocess.run(["runuser", "-u", name, "--", "env", "-i", *(f"{k}={v}" for k, v in variables.items()),
                           "sh", "-c", script, "sh", *command], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)
