"""Episode programs, forked from the programs' fork server: exit codes as python and the shell give them, output,
specs of any size, a fork server that dies replaced, and a sandboxed program born in its sandbox's PID namespace
(checked from the host's /proc) while the next unsandboxed one is born in the host's.

Real parts: the fork server process, real forks, bubblewrap's namespaces."""

import asyncio
import os
import signal
from pathlib import Path

import pytest
from conftest import write_files

from openenv_gym.programs import Program, ProgramSpec, run_to_end
from openenv_gym.programs import program as programs
from openenv_gym.sandbox import WORKDIR, Sandbox, SandboxPolicy, unavailable

ENTRIES = {"entries.py": '''
import os, sys, threading, time

def quits(how):
    sys.exit(how)

def raises():
    raise ValueError("bad input, from the program")

def leaves_a_thread():
    def late():
        time.sleep(0.3)
        print("the thread finished", flush=True)
    threading.Thread(target=late).start()

def says(text):
    print(len(text), text[:5])
    return {"pid": os.getpid()}
'''}


def spec(folder: Path, workdir: Path, **fields) -> ProgramSpec:
    return ProgramSpec(workdir=str(workdir), environ={"PATH": os.environ["PATH"]}, cpu_seconds=30,
                       memory_bytes=2 << 30, output_bytes=16 << 20, open_files=256, folder=str(folder),
                       name="program-tests", **{"output_prefix": "out", **fields})


@pytest.fixture
def entries(tmp_path) -> Path:
    return write_files(tmp_path / "entries", ENTRIES)


def test_exit_codes_are_what_python_and_the_shell_would_give(entries, tmp_path):
    async def main():
        cases = {"sys.exit(3)": spec(entries, tmp_path, entry="entries:quits", call={"how": 3}),
                 "sys.exit(text)": spec(entries, tmp_path, entry="entries:quits", call={"how": "gave up"}),
                 "an exception": spec(entries, tmp_path, entry="entries:raises"),
                 "a command": spec(entries, tmp_path, command=["sh", "-c", "echo out; echo err >&2; exit 5"]),
                 "a missing command": spec(entries, tmp_path, command=["no-such-command-here"]),
                 "killed by a signal": spec(entries, tmp_path, command=["sh", "-c", "kill -TERM $$"])}
        return {name: await run_to_end(case, tmp_path, timeout=60) for name, case in cases.items()}
    done = asyncio.run(main())
    assert done["sys.exit(3)"].exit_code == 3
    assert (done["sys.exit(text)"].exit_code, done["sys.exit(text)"].stderr) == (1, "gave up\n")
    assert done["an exception"].exit_code == 1
    assert done["an exception"].stderr.splitlines()[-1] == "ValueError: bad input, from the program"
    assert "openenv_gym" not in done["an exception"].stderr  # (the launcher's frames are not the program's)
    assert (done["a command"].exit_code, done["a command"].stdout, done["a command"].stderr) == (5, "out\n", "err\n")
    assert done["a missing command"].exit_code == 127
    assert done["a missing command"].stderr.startswith("cannot run 'no-such-command-here'")
    assert done["killed by a signal"].exit_code == -signal.SIGTERM


def test_a_program_ends_when_its_threads_have_and_a_large_spec_reaches_it_whole(entries, tmp_path):
    text = "x" * (4 << 20)  # (more than a socket's buffer: the spec travels in a memfd)

    async def main():
        threads = await run_to_end(spec(entries, tmp_path, entry="entries:leaves_a_thread"), tmp_path, timeout=60)
        large = await run_to_end(spec(entries, tmp_path, entry="entries:says", call={"text": text}), tmp_path, 60)
        return threads, large
    threads, large = asyncio.run(main())
    assert (threads.exit_code, threads.stdout) == (0, "the thread finished\n")
    assert large.exit_code == 0 and large.stdout.startswith(f"{len(text)} xxxxx\n")


def test_more_programs_at_once_than_the_fork_servers_socket_queues_all_start_and_end(entries, tmp_path):
    """The socket to the fork server holds a few hundred requests (278 here); the rest wait for room, all of them."""
    async def main():
        return await asyncio.gather(*(run_to_end(spec(entries, tmp_path, command=["true"], output_prefix=f"o{i}"),
                                                 tmp_path, timeout=120) for i in range(600)))
    assert [done.exit_code for done in asyncio.run(main())] == [0] * 600


def test_a_fork_server_that_died_is_replaced_and_its_programs_end_killed(entries, tmp_path):
    async def main():
        program = await Program.start(spec(entries, tmp_path, command=["sleep", "60"]), tmp_path)
        server = programs._server
        server.process.kill()
        server.process.wait()
        ended = await asyncio.wait_for(program.wait(), 30)
        again = await run_to_end(spec(entries, tmp_path, command=["echo", "again"]), tmp_path, timeout=60)
        return server, ended, again
    dead, ended, again = asyncio.run(main())
    assert ended == -signal.SIGKILL
    assert again.stdout == "again\n" and programs._server is not dead


@pytest.mark.skipif(unavailable() is not None, reason="needs the sandbox (make test sets it up)")
def test_a_sandboxed_program_is_born_in_its_sandboxs_pid_namespace_and_the_next_one_outside(entries, tmp_path):
    async def namespace_of(program: Program) -> tuple[str, list[str]]:
        """(its PID namespace, its pid in each namespace it is in), read from the host's /proc"""
        found = os.readlink(f"/proc/{program.pid}/ns/pid"), \
            Path(f"/proc/{program.pid}/status").read_text().split("NSpid:")[1].split("\n")[0].split()
        program.kill()
        await program.wait()
        return found

    async def main():
        sandbox = await Sandbox.open(SandboxPolicy(readable=(str(entries),)))
        try:
            inside = await namespace_of(await Program.start(
                spec(entries, Path(WORKDIR), command=["sleep", "60"], sandbox=sandbox.entry, processes=64),
                sandbox.host_path(WORKDIR)))
            for_children = os.readlink(f"/proc/{programs._server.process.pid}/ns/pid_for_children")
            outside = await namespace_of(await Program.start(spec(entries, tmp_path, command=["sleep", "60"]),
                                                             tmp_path))
            return inside, for_children, outside, os.readlink(f"/proc/{sandbox.pid}/ns/pid")
        finally:
            await sandbox.close()
    inside, for_children, outside, sandboxs = asyncio.run(main())
    host = os.readlink("/proc/self/ns/pid")
    assert inside[0] == sandboxs != host and len(inside[1]) == 2  # a pid on the host, and one in its sandbox
    assert for_children == host  # the fork server went back to its own namespace
    assert outside[0] == host and len(outside[1]) == 1
