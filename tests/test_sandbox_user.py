"""A server run by an ordinary user sandboxes every episode too, in a user namespace of its own
(openenv_gym/sandbox/userns.py): with subordinate uids (a uid per episode), without (every episode shares the
user's), and with control groups an administrator delegated to the user.

The user is made here (useradd), with a venv of /usr/bin/python3 (the suite's interpreter lives under /root, which
the user cannot read). The server, the checking process (sandbox_user_escapes.py), the secret files, the bystander
process and the listener all belong to that user; the checks are made from outside the sandbox, by their effects."""

import json
import os
import pwd
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT
from sandbox_user_escapes import assert_contained

from benchmarks.ordinary_user import ensure_user, readable_by_all, run_as, user_venv

SHELL = ROOT / "tests" / "sandbox_envs" / "shell"
USERS = {"shared": "openenv-shared", "subordinate": "openenv-subuid"}  # no subordinate uids; 65,536 of them
SUBORDINATE = "200000:65536"
CGROUP_V1 = Path("/sys/fs/cgroup")


def _user(name: str, subordinate: bool) -> pwd.struct_passwd:
    return ensure_user(name, SUBORDINATE if subordinate else None)


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """A folder every user reads: the user's venv (openenv_gym installed from this checkout) and the shell env."""
    folder = tmp_path_factory.mktemp("ordinary-user")
    user_venv(folder)
    shutil.copytree(SHELL, folder / "shell")
    readable_by_all(folder)
    return folder


def escapes(place: Path, name: str, subordinate: bool, *prefix: str) -> dict:
    """What sandbox_user_escapes.py found, run as user `name` (after `prefix`, shell commands)."""
    user = _user(name, subordinate)
    work = place / f"work-{name}"
    shutil.rmtree(work, ignore_errors=True)
    (work / "home").mkdir(parents=True)
    shutil.chown(work, user.pw_uid, user.pw_gid)
    shutil.chown(work / "home", user.pw_uid, user.pw_gid)
    command = [str(place / "venv" / "bin" / "python"), str(ROOT / "tests" / "sandbox_user_escapes.py"),
               str(place / "shell"), str(work)]
    done = run_as(name, command, {"OPENENV_GYM_HOME": str(work / "home")}, prefix, timeout=300, cwd=work)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found["checker_uid"] == found["server_uid"] == user.pw_uid  # (all of it the user's)
    return found


def test_without_subordinate_uids_every_episode_shares_the_users_uid_and_escapes_nothing(place):
    found = escapes(place, USERS["shared"], False)
    assert_contained(found)
    uid = pwd.getpwnam(USERS["shared"]).pw_uid
    assert [process["uid"] for process in found["episode_processes"]] == [uid]  # its uid, without a capability
    assert found["identity"].startswith("exit 0\nuid=0(root) gid=0(root)")  # (root of its own user namespace)
    assert "that maps only its user's uid" in found["server_said"]
    assert "memory bounded per process (RLIMIT_DATA)" in found["server_said"]
    assert "MemoryError" in found["too_much"]  # (without a control group, the one process is refused)


def test_with_subordinate_uids_each_episode_has_one_of_its_own(place):
    found = escapes(place, USERS["subordinate"], True)
    assert_contained(found)
    first, count = map(int, SUBORDINATE.split(":"))
    [process] = found["episode_processes"]
    assert first <= process["uid"] < first + count  # a subordinate uid, seen from the host
    assert "with subordinate uids (each episode a uid of its own)" in found["server_said"]


@pytest.mark.skipif(not (CGROUP_V1 / "memory" / "cgroup.procs").exists(), reason="the v1 memory hierarchy is not here")
def test_control_groups_delegated_to_the_user_bound_each_episode(place):
    """An administrator made v1 groups for the user and gave them to it: the server makes its episodes' groups in
    them, and says so."""
    name = USERS["subordinate"]
    user = _user(name, True)
    groups = [CGROUP_V1 / controller / f"openenv-test-{name}" for controller in ("pids", "memory")]
    for group in groups:
        group.mkdir(exist_ok=True)
        for path in (group, group / "cgroup.procs", group / "tasks"):
            os.chown(path, user.pw_uid, user.pw_gid)
    try:
        found = escapes(place, name, True, *(f"echo $$ > {group}/cgroup.procs" for group in groups))
        assert_contained(found)
        assert "control groups v1 (delegated): each episode's memory and processes bounded together" \
            in found["server_said"]
        assert found["too_much"] == "exit 137\nKilled\n"  # (the episode's group bounds its memory: killed)
    finally:
        for group in groups:
            for folder in sorted(group.glob("**/"), key=lambda path: -len(path.parts)):
                folder.rmdir()


def as_user(place: Path, name: str, *arguments: str,
            refuse_user_namespaces: bool = False) -> subprocess.CompletedProcess:
    """`python -m openenv_gym ARGUMENTS` as user `name`; with `refuse_user_namespaces`, under a seccomp filter that
    refuses them, as Docker's default profile does (sandbox/seccomp.py's, the episodes' own)."""
    python = str(place / "venv" / "bin" / "python")
    refuse = "from openenv_gym.sandbox.seccomp import forbid_user_namespaces\nforbid_user_namespaces()\n"
    start = f"import os, sys\n{refuse * refuse_user_namespaces}os.execv(sys.executable, sys.argv[1:])"
    return run_as(name, [python, "-c", start, python, "-m", "openenv_gym", *arguments],
                  {"OPENENV_GYM_HOME": str(place / f"work-{name}" / "home")}, timeout=120, cwd=place)


def test_doctor_says_which_sandbox_a_users_server_would_have(place):
    shared = as_user(place, _user(USERS["shared"], False).pw_name, "doctor")
    subordinate = as_user(place, _user(USERS["subordinate"], True).pw_name, "doctor")
    assert "that maps only its user's uid" in shared.stdout.splitlines()[0]
    assert "with subordinate uids" in subordinate.stdout.splitlines()[0]
    for done in (shared, subordinate):
        assert done.stdout.splitlines()[1].startswith("cgroups      no control group the server may write")
        assert "kinds        served: python, ors" in done.stdout and "agent" in done.stdout.splitlines()[-1]


def test_where_the_kernel_refuses_user_namespaces_a_users_server_refuses_naming_both_ways_in(place):
    name = _user(USERS["shared"], False).pw_name
    served = as_user(place, name, "serve", str(place / "shell"), "--port", "0", refuse_user_namespaces=True)
    assert served.returncode != 0
    for expected in ("the kernel refused one: Operation not permitted", "`openenv-gym serve`", "or as root",
                     "--no-sandbox"):
        assert expected in served.stderr, served.stderr
    doctor = as_user(place, name, "doctor", refuse_user_namespaces=True)
    assert doctor.stdout.splitlines()[0].startswith("sandbox      none (")
    assert "kinds        need --no-sandbox (no sandbox here): agent, harbor" in doctor.stdout
