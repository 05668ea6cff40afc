"""Every episode that runs programs runs them in a sandbox of its own: a shell agent (each model reply run as a
command, as a bash harness runs them) sends what a weak policy would, and every escape is checked from outside the
sandbox, by its effects on the host, never by what the episode says of itself.

Real parts: bubblewrap's namespaces, the kernel's control groups, a real server and its programs on loopback."""

import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import ROOT, Listener, descendants

import openenv_gym
from openenv_gym.client.local import LocalServer
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.schema import ManifestError
from openenv_gym.sandbox import unavailable
from openenv_gym.sandbox.netns import in_namespace
from openenv_gym.sandbox.pool import IDLE_SECONDS
from openenv_gym.sandbox.sandbox import UID_BASE

SHELL = ROOT / "tests" / "sandbox_envs" / "shell"


@pytest.fixture(scope="module")
def shell_url():
    assert unavailable() is None, f"these tests need the sandbox, which make test sets up: {unavailable()}"
    server = LocalServer(str(SHELL), 1, 100)
    yield server
    server.stop()


async def _play(session, commands: list[str], may_end: bool) -> list[str]:
    """Each command's output, as the policy sees it (the next observation); `may_end`: a command may end the
    episode (it kills its own program, say), and the rest are not sent."""
    await session.reset(options={"index": 0})
    outputs = []
    for command in commands:
        obs, reward, terminated, truncated, info = await session.step(command)
        if terminated or truncated:
            assert may_end, info
            return outputs
        outputs.append(obs)
    await session.step("exit")
    return outputs


def shell(url: str, *commands: str, may_end: bool = False) -> list[str]:
    async def main():
        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            try:
                return await _play(session, list(commands), may_end)
            finally:
                await session.close()
    return asyncio.run(main())



def seen_inside(policy, look) -> str:
    """What `look()` returns (or the exception it raised), run in a process forked into a new sandbox of `policy`."""
    from openenv_gym.sandbox import Sandbox, enter

    async def main() -> str:
        sandbox = await Sandbox.open(policy)
        try:
            read, write = os.pipe()
            child = os.fork()
            if child == 0:  # (a forked child: it never returns into the tests)
                try:
                    enter(sandbox.entry)
                    os.write(write, look().encode())
                except BaseException as exc:
                    os.write(write, repr(exc).encode())
                finally:
                    os._exit(0)
            os.close(write)
            os.waitpid(child, 0)
            return os.read(read, 1000).decode()
        finally:
            await sandbox.close()
    return asyncio.run(main())


def test_an_episode_reads_none_of_the_servers_files_and_writes_none_of_the_hosts(shell_url, tmp_path):
    """The server's home, a user's home and the temporary files of the host are hidden from it; the host's system
    files it may read (read-only), and it writes nowhere but in its own working directory and /tmp."""
    home = Path(os.environ["OPENENV_GYM_HOME"])  # the server's (it inherited the tests')
    secrets = {home / "secret.txt": "home-secret-1234", tmp_path / "secret.txt": "tmp-secret-5678",
               Path.home() / ".sandbox-test-secret": "user-secret-9012"}
    for path, text in secrets.items():
        path.write_text(text)
    targets = [home / "escape", tmp_path / "escape", ROOT / ".sandbox-escape", SHELL / "escape",
               Path(sys.prefix) / "escape", Path("/etc/sandbox-escape")]
    try:
        outputs = shell(shell_url.url, *(f"cat {path}" for path in secrets),
                        *(f"echo pwned > {path}" for path in targets), "echo mine > mine.txt && cat mine.txt",
                        "ls ~ /tmp")
        for path, text in secrets.items():
            assert text not in "".join(outputs), path
        assert [path for path in targets if path.exists()] == []  # nothing written outside, seen from the host
        assert outputs[len(secrets) + len(targets)].endswith("mine\n")  # its own working directory is writable
    finally:
        for path in [*secrets, *targets]:
            if path.exists():
                path.unlink()


def test_sessions_see_none_of_each_others_files_or_processes(shell_url):
    async def main():
        async with openenv_gym.connect(shell_url.url) as conn:
            a, b = conn.session(), conn.session()
            await a.reset(options={"index": 0})
            await b.reset(options={"index": 0})
            await a.step("echo alpha-marker-31337 > note.txt; sleep 600 >/dev/null 2>&1 & echo started")
            seen = [(await b.step(command))[0] for command in (
                "cat /tmp/work/note.txt; ls -a /tmp /tmp/work", "grep -rs alpha-marker / --include=note.txt; true",
                "ps -eo pid,args", "kill -9 -1; echo killed")]
            still = (await a.step("cat note.txt; ps -eo args"))[0]
            for session in (a, b):
                await session.close()
            return seen, still
    seen, still = asyncio.run(main())
    assert "alpha-marker-31337" not in "".join(seen) and "sleep 600" not in seen[2]
    assert "alpha-marker-31337" in still and "sleep 600" in still  # b's kill -9 -1 reached none of a's processes


def test_no_network_but_the_model_endpoint(shell_url):
    listener = Listener()
    try:
        connect = (f"{sys.executable} -c \"import socket, sys\ntry: socket.create_connection(('{{}}', {{}}), 3)\n"
                   "except OSError as exc: sys.exit(type(exc).__name__)\"")
        outputs = shell(shell_url.url, connect.format("127.0.0.1", listener.port), connect.format("10.0.0.1", 80),
                        connect.format("pypi.org", 443))
        time.sleep(0.3)
        assert listener.accepted == 0  # the host's listener heard from nobody
        assert [output.split("\n")[:2] for output in outputs] == [
            ["exit 1", "ConnectionRefusedError"], ["exit 1", "OSError"], ["exit 1", "gaierror"]]
    finally:
        listener.close()


def test_an_allow_list_reaches_its_hosts_ports_and_nothing_else(tmp_path):
    """network = {allow = [...]}: a loopback service of the host's by its address, another by its name (resolved in
    the sandbox by its own /etc/hosts, forwarded by the server), and no other port; counted by the host's listeners."""
    allowed, named, other = Listener(), Listener(), Listener()
    folder = tmp_path / "shell"
    shutil.copytree(SHELL, folder)
    (folder / "openenv.toml").write_text(f'network = {{ allow = ["127.0.0.1:{allowed.port}", "localhost:{named.port}"] '
                                         f'}}\n{(SHELL / "openenv.toml").read_text()}')  # (before its [limits])
    server = LocalServer(str(folder), 1, 10)
    try:
        connect = f"{sys.executable} -c \"import socket; socket.create_connection(('{{}}', {{}}), 3)\" && echo reached"
        outputs = shell(server.url, connect.format("127.0.0.1", allowed.port), connect.format("localhost", named.port),
                        connect.format("127.0.0.1", other.port), connect.format("localhost", other.port),
                        "getent hosts localhost")
        time.sleep(0.3)
        assert (allowed.accepted, named.accepted, other.accepted) == (1, 1, 0), outputs
        assert [output.endswith("reached\n") for output in outputs[:4]] == [True, True, False, False]
        assert outputs[4].split()[2] == "127.0.1.1"  # (the name, at its address inside)
    finally:
        server.stop()
        for listener in (allowed, named, other):
            listener.close()


def test_an_allow_list_entry_that_cannot_be_honoured_is_refused_with_the_reason(tmp_path):
    folder = tmp_path / "shell"
    shutil.copytree(SHELL, folder)
    for entry, reason in (("pypi.org", "an allowed address is \"host:port\""), ("10.0.0.1:443", "name the host"),
                          ("127.0.0.1:80", "model endpoint")):
        (folder / "openenv.toml").write_text(f'network = {{ allow = ["{entry}"] }}\n' +
                                             (SHELL / "openenv.toml").read_text())
        with pytest.raises(ManifestError, match=re.escape(reason)):
            load_manifest(folder)


def test_a_program_inherits_none_of_the_servers_secrets(monkeypatch):
    """The server's environment reaches its programs without its token, keys, passwords or own settings: only what
    they need to run, as the server's own programs would."""
    secrets = {"OPENENV_GYM_TOKEN": "server-token-1111", "AWS_SECRET_ACCESS_KEY": "aws-2222",
               "DB_PASSWORD": "db-3333", "HF_TOKEN": "hf-4444", "ANTHROPIC_API_KEY": "anthropic-5555",
               "PIP_EXTRA_INDEX_URL": "https://deploy:pip-7777@index.example/simple", "MY_SERVICE": "mine-8888"}
    for name, value in {**secrets, "PIP_INDEX_URL": "https://index.example/simple"}.items():
        monkeypatch.setenv(name, value)
    server = LocalServer(str(SHELL), 1, 10)
    try:
        seen = shell(server.url, "env")[0]
    finally:
        server.stop()
    assert [value for value in secrets.values() if value in seen] == []
    assert "PIP_INDEX_URL=https://index.example/simple" in seen  # (what programs need to run is passed)


def test_an_episode_makes_no_user_namespace_of_its_own(shell_url):
    """Root in a user namespace of its own would put more of the kernel in its reach: its processes carry a seccomp
    filter (seen in the host's /proc) that refuses to make one."""
    async def main():
        async with openenv_gym.connect(shell_url.url) as conn:
            session = conn.session()
            await session.reset(options={"index": 0})
            said = (await session.step("unshare -U -r id; echo tried; (setsid sleep 77 >/dev/null 2>&1 &)"))[0]
            filtered = [Path(f"/proc/{pid}/status").read_text().split("Seccomp:")[1].split()[0]
                        for pid in descendants(shell_url.process.pid)
                        if Path(f"/proc/{pid}/cmdline").read_bytes() == b"sleep\0" + b"77\0"]
            await session.close()
            return said, filtered
    said, filtered = asyncio.run(main())
    assert "uid=0" not in said and "Operation not permitted" in said
    assert filtered == ["2"]  # (2: a filter)


def test_an_episode_may_not_use_the_kernels_keyrings(shell_url):
    """The user keyring of a uid outlives an episode (an ordinary user's server renews sandboxes with the same uid):
    add_key(2) is refused, as Docker's profile refuses it."""
    add_key = ("import ctypes; libc = ctypes.CDLL(None, use_errno=True); "
               "print(libc.syscall(248, b'user', b'left', b'behind', 6, -4), ctypes.get_errno())")  # (x86-64)
    assert shell(shell_url.url, f"{sys.executable} -c \"{add_key}\"")[0] == "exit 0\n-1 1\n"  # EPERM


def test_signals_reach_only_the_episodes_own_processes(shell_url):
    bystander = subprocess.Popen(["sleep", "300"])
    try:
        shell(shell_url.url, f"kill -9 {bystander.pid}", f"kill -9 {shell_url.process.pid}", "pkill -9 sleep",
              "kill -9 -1", may_end=True)  # (the last kills its own program: its episode ends)
        assert bystander.poll() is None and shell_url.alive  # the host's processes and the server live on
        assert shell(shell_url.url, "echo after")[0].endswith("after\n")  # and it serves the next episode
    finally:
        bystander.kill()
        bystander.wait()


def test_venvs_check_says_that_it_runs_sandboxed(shell_url):
    checked = subprocess.run([sys.executable, "-m", "openenv_gym", "venvs", "check", str(SHELL)], capture_output=True,
                             text=True, timeout=300)
    assert "shell's episodes run their programs in a sandbox each, here" in checked.stdout


def test_an_episode_leaves_no_process_and_no_file_behind(shell_url):
    groups = [Path("/sys/fs/cgroup/pids/openenv-gym"), Path("/sys/fs/cgroup/memory/openenv-gym")]

    def count() -> tuple[int, int]:
        """(the server's processes, its episodes' control groups, named after their worker)"""
        processes = descendants(shell_url.process.pid)
        workers = {shell_url.process.pid, *processes}
        return len(processes), sum(1 for folder in groups if folder.is_dir() for group in folder.glob("*-*")
                                   if int(group.name.split("-")[0]) in workers)
    shell(shell_url.url, "echo warm")  # the fork server up
    time.sleep(2 * IDLE_SECONDS)  # (the sandbox kept for the next episode, closed)
    before = count()
    for _ in range(5):
        shell(shell_url.url, "sleep 600 >/dev/null 2>&1 & (setsid sleep 700 >/dev/null 2>&1 &); "
                             "dd if=/dev/zero of=big bs=1M count=4 2>&1 | tail -1")
    deadline = time.monotonic() + 3 * IDLE_SECONDS + 5
    while count() != before and time.monotonic() < deadline:
        time.sleep(0.05)
    assert count() == before


def _episode_processes(server: LocalServer) -> dict[int, int]:
    """The server's processes that run as an episode's uid: pid -> uid (read from the host's /proc)."""
    found = {}
    for pid in descendants(server.process.pid):
        try:
            uid = int(Path(f"/proc/{pid}/status").read_text().split("Uid:")[1].split()[0])
        except (OSError, IndexError):
            continue
        if uid >= UID_BASE:
            found[pid] = uid
    return found


def test_the_next_episode_finds_nothing_of_the_one_before_in_its_renewed_sandbox(shell_url):
    """A session's next episode starts in the sandbox of its last one, renewed: every process of the last killed, its
    files in the working directory, /tmp and /dev/shm removed, its System V objects gone, and a uid of its own. Seen
    from the host: the sandbox's file systems through /proc, the processes' uids and IPC namespaces' tables."""
    sysv = f"{sys.executable} -c 'import ctypes; ctypes.CDLL(None).shmget(0x5eed, 4096, 0o1600)'; sleep 600"
    markers = "touch mark-workdir /tmp/mark-tmp /dev/shm/mark-shm; mkdir -p deep/er; touch deep/er/mark-deep"

    def segments(pids) -> list[int]:  # the System V shared memory keys each process's IPC namespace holds
        return [int(line.split()[0]) for pid in pids for line in in_namespace(
            pid, "ipc", lambda: Path("/proc/sysvipc/shm").read_text().splitlines()[1:])]

    def marks(holders) -> list[Path]:  # (named: a walk of its /tmp would walk a checkout under the host's /tmp)
        return [path for pid in holders for name in ("tmp/mark-tmp", "dev/shm/mark-shm", "tmp/work/mark-workdir",
                                                     "tmp/work/deep/er/mark-deep")
                if (path := Path(f"/proc/{pid}/root/{name}")).exists()]

    async def main():
        async with openenv_gym.connect(shell_url.url) as conn:
            session = conn.session()
            await session.reset(options={"index": 0})
            await session.step(f"{markers}; (sleep 600 >/dev/null 2>&1 &); ({sysv} >/dev/null 2>&1 &); sleep 0.5")
            first = _episode_processes(shell_url)
            holders = [pid for pid in descendants(shell_url.process.pid)
                       if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"sleep\0infinity")]
            during = marks(holders), segments(first)
            await session.step("exit")
            await session.reset(options={"index": 0})  # the same sandbox, renewed
            second = _episode_processes(shell_url)
            after = marks(holders), segments(second)
            await session.close()
            return first, second, during, after
    first, second, during, after = asyncio.run(main())
    assert len(during[0]) == 4 and 0x5eed in during[1]  # (what the checks look for is there to be seen)
    assert len(set(first.values())) == 1 and len(set(second.values())) == 1
    assert not set(first) & set(second)  # none of the episode's processes lived on
    assert set(first.values()) != set(second.values())  # a new uid
    assert after == ([], [])


def test_the_server_reads_and_writes_a_sandboxs_files_inside_it_whatever_links_its_programs_made(shell_url, tmp_path):
    """The server runs as root and reads an episode's output files (and Verifiers' runtimes read and write its
    files): a link the episode put in their place leads to the sandbox's own view, never to the host's files."""
    from openenv_gym.sandbox import Sandbox, SandboxPolicy
    from openenv_gym.sandbox.paths import read_inside, write_inside

    secret = Path(os.environ["OPENENV_GYM_HOME"]) / "link-secret.txt"  # hidden in every sandbox
    secret.write_text("link-secret-7777")
    target = tmp_path / "overwritten-through-a-link"
    target.write_text("intact")

    async def program_output() -> dict:
        async with openenv_gym.connect(shell_url.url) as conn:
            session = conn.session()
            await session.reset(options={"index": 0})
            info = (await session.step(f"rm -f .stderr; ln -s {secret} .stderr; kill -9 $PPID"))[4]
            await session.close()
            return info

    async def runtime_files() -> tuple[list[str], str]:
        sandbox = await Sandbox.open(SandboxPolicy())
        try:
            work = sandbox.host_path("/tmp/work")
            os.symlink(str(secret), work / "read-me")
            os.symlink(str(target), work / "write-me")
            os.symlink(str(tmp_path), work / "folder")
            outcomes = []
            for attempt in (lambda: read_inside(sandbox.pid, "/tmp/work/read-me"),
                            lambda: write_inside(sandbox.pid, "/tmp/work/write-me", b"pwned", sandbox.uid),
                            lambda: write_inside(sandbox.pid, "/tmp/work/folder/new.txt", b"pwned", sandbox.uid)):
                try:
                    outcomes.append(repr(attempt()))
                except OSError as exc:
                    outcomes.append(type(exc).__name__)
            write_inside(sandbox.pid, "/tmp/work/made/deep/file.txt", b"mine", sandbox.uid)
            made = work / "made" / "deep" / "file.txt"
            return outcomes, f"{made.read_text()} {made.stat().st_uid == sandbox.uid}"
        finally:
            await sandbox.close()

    info = asyncio.run(program_output())
    assert "killed" in info["error"]["message"] or "-9" in info["error"]["message"]
    assert "link-secret-7777" not in json.dumps(info)
    outcomes, made = asyncio.run(runtime_files())
    assert "link-secret-7777" not in "".join(outcomes) and len(outcomes) == 3
    assert target.read_text() == "intact" and not (tmp_path / "new.txt").exists()
    assert made == "mine True"  # (what the server writes in it is the episode's to change)


def test_without_bubblewrap_an_agent_env_is_refused_unless_told_no_sandbox(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # the server's: no bwrap on it
    with pytest.raises(openenv_gym.ServerStartError, match=r"(?s)runs programs.*bubblewrap \(bwrap\) is not installed: "
                                                             r"install bubblewrap.*serve it with --no-sandbox"):
        LocalServer(str(SHELL), 1, 10)
    checked = subprocess.run([sys.executable, "-m", "openenv_gym", "venvs", "check", str(SHELL)], capture_output=True,
                             text=True, timeout=300)
    assert checked.returncode == 0 and "shell loads as the server will load it" in checked.stdout
    assert "bubblewrap (bwrap) is not installed" in checked.stdout and "--no-sandbox" in checked.stdout
    server = LocalServer(str(SHELL), 1, 10, "--no-sandbox")
    try:
        outputs = shell(server.url, f"echo unconfined > {tmp_path / 'written'}; echo done")
        assert outputs[0].endswith("done\n") and (tmp_path / "written").read_text() == "unconfined\n"
    finally:
        server.stop()


def test_what_it_must_read_is_shown_again_inside_hidden_homes(tmp_path, monkeypatch):
    """A user's venvs live in their home (~/.openenv_gym/venvs), which the sandbox hides: the env's own is shown again,
    readable by the episode's uid through every folder above it, and nothing else of the home is."""
    from openenv_gym.sandbox import SandboxPolicy

    home = tmp_path / "home"
    venv = home / ".openenv_gym" / "venvs" / "abc123"
    (venv / "lib").mkdir(parents=True)
    (venv / "lib" / "module.py").write_text("shown")
    (home / ".openenv_gym" / "venvs" / "other").mkdir()
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("private")
    for folder in (tmp_path, home, home / ".openenv_gym", home / ".openenv_gym" / "venvs", venv, venv / "lib"):
        folder.chmod(0o755)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("OPENENV_GYM_VENVS", str(home / ".openenv_gym" / "venvs"))

    def look() -> str:
        seen = [(venv / "lib" / "module.py").read_text()]
        for path in (home / ".ssh" / "id_rsa", home / ".openenv_gym" / "venvs" / "other"):
            seen.append("visible" if path.exists() else "hidden")
        return " ".join(seen)
    assert seen_inside(SandboxPolicy(readable=(str(venv),)), look) == "shown hidden hidden"


def test_episodes_uids_are_among_those_the_user_namespace_maps():
    """The host maps every uid; a pod with a user namespace of its own (hostUsers: false) maps 65,536, where a uid
    above them could not own the working directory nor be switched to."""
    from openenv_gym.sandbox.sandbox import uid_range

    assert uid_range("         0          0 4294967295\n") == (UID_BASE, 4096, 1 << 16)
    first, blocks, size = uid_range("         0    1000000      65536\n")
    assert (first, blocks * size) == (32768, 32768)  # its upper half, in blocks for the workers
    assert uid_range("0 1000 1\n1 200000 65535\n")[0] + 16 * uid_range("0 1000 1\n1 200000 65535\n")[2] <= 65536


def test_openenv_gyms_own_files_are_shown_even_from_a_checkout_the_sandbox_hides(tmp_path, monkeypatch):
    """A checkout under /tmp (a fresh clone, say) holds the venvs, which stay hidden: the checkout is never shown
    whole, but openenv_gym's own folder is (its tools and programs run inside: Harbor's stand-ins, its harness)."""
    from openenv_gym.sandbox import SandboxPolicy, mounts

    checkout = tmp_path / "checkout"
    (checkout / "openenv_gym").mkdir(parents=True)
    (checkout / ".venv-envs").mkdir()
    monkeypatch.setenv("OPENENV_GYM_VENVS", str(checkout / ".venv-envs"))
    monkeypatch.setattr(mounts, "PACKAGE", checkout / "openenv_gym")
    monkeypatch.setattr(sys, "path", [*sys.path, str(checkout)])
    arguments = mounts.bwrap_arguments.__wrapped__(SandboxPolicy())
    shown = {arguments[index + 1] for index, argument in enumerate(arguments) if argument == "--ro-bind"}
    assert str(checkout / "openenv_gym") in shown and str(checkout) not in shown


def test_a_folder_of_the_tasks_own_at_the_root_is_empty_where_the_host_has_one_but_for_what_it_must_read():
    """A Harbor task's workdir (/check, /work) may be a folder the host keeps at its root (a CI's checkout is there):
    the sandbox gets an empty one of its own, writable, with what its programs must read shown again read-only."""
    from openenv_gym.sandbox import SandboxPolicy, mounts

    if os.geteuid() != 0:
        pytest.skip("makes a folder at the host's root, as a CI's checkout is")
    top = Path(f"/openenv-gym-test-{os.getpid()}")
    shown = top / "checkout" / "venv"
    try:
        shown.mkdir(parents=True)
        (shown / "module.py").write_text("shown")
        (top / "host-file.txt").write_text("the host's")
        assert mounts.own_folder(f"{top}/app/x") == str(top) and mounts.own_folder("/usr/local/x") is None

        def look() -> str:
            (top / "mine.txt").write_text("written")
            return " ".join([(shown / "module.py").read_text(), str((top / "host-file.txt").exists()),
                             (top / "mine.txt").read_text()])
        policy = SandboxPolicy(readable=(str(shown),), writable=(str(top),))
        assert seen_inside(policy, look) == "shown False written"
        assert not (top / "mine.txt").exists()
    finally:
        shutil.rmtree(top)


def test_system_folders_an_episode_owns_are_overlays_that_keep_what_was_mounted_in_them():
    """A Harbor image's writes in /etc and /var (overlay.py): the sandbox's /etc and /var become overlays of its own,
    and what was mounted in them before is still there: its /etc/hosts naming the allowed hosts, its empty /var/tmp
    (the host's is hidden); the host's /etc is untouched."""
    from openenv_gym.sandbox import Sandbox, SandboxPolicy

    host_file = Path(f"/var/tmp/openenv-gym-hidden-{os.getpid()}")
    host_file.write_text("the host's")

    async def main() -> tuple[str, list[str], bool, int]:
        owned = ("/etc/openenv-gym-owned.conf", "/var/log/openenv-gym-owned.log")
        sandbox = await Sandbox.open(SandboxPolicy(owned=owned, allow=("example.com:443",)))
        try:
            owner = os.stat(sandbox.host_path("/etc")).st_uid
            return (sandbox.host_path("/etc/hosts").read_text(), os.listdir(sandbox.host_path("/var/tmp")),
                    await sandbox.renew(), owner - sandbox.uid)
        finally:
            await sandbox.close()
    try:
        hosts, var_tmp, renewed, owner = asyncio.run(main())
    finally:
        host_file.unlink()
    assert "example.com" in hosts and var_tmp == [] and owner == 0  # (its /etc is its uid's: it writes a file there)
    assert not renewed  # (an overlay's upper layer is not emptied under it: the sandbox is made anew)
    assert os.stat("/etc").st_uid == 0 and not os.path.exists("/etc/openenv-gym-owned.conf")
