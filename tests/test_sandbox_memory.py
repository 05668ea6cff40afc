"""Memory bounds that real programs survive: an episode's control group bounds the memory its processes hold
together, and no address-space limit stands in for it, so runtimes that reserve more address space than they use
start (Node's WebAssembly, behind Node's fetch; Go's runtime). A process that allocates past the bound is killed,
and its episode says that its memory bound ended it (test_sandbox_abuse.py).

Real parts: bubblewrap's namespaces, the kernel's control groups, node from the machine, a Go program built here."""

import asyncio
import os
import shutil
import subprocess

import pytest
from conftest import ROOT

import openenv_gym
from openenv_gym.client.local import LocalServer
from openenv_gym.sandbox import unavailable

SHELL = ROOT / "tests" / "sandbox_envs" / "shell"
WASM = "node -e 'WebAssembly.instantiate(new Uint8Array([0,97,115,109,1,0,0,0,5,3,1,0,1])).then(() => " \
       "console.log(\"wasm ok\"), (error) => console.log(error.message))'"
GO_PROGRAM = 'package main\nimport "fmt"\nfunc main() { b := make([]byte, 64<<20); b[1] = 1; fmt.Println("go ok") }\n'


@pytest.fixture(scope="module")
def go_program(tmp_path_factory):
    folder = tmp_path_factory.mktemp("go")
    (folder / "hello.go").write_text(GO_PROGRAM)
    subprocess.run(["go", "build", "-o", "hello", "hello.go"], cwd=folder, check=True, timeout=300,
                   env={**os.environ, "GOCACHE": str(folder / "cache"), "GOPATH": str(folder)})
    return folder / "hello"


def served(folder, limits: str | None, go_program):
    """A server of the shell env (copied into `folder`, the Go program with it: the env's folder is shown in its
    sandboxes) with `limits` for its [limits] table (None: the defaults)."""
    assert unavailable() is None, f"these tests need the sandbox, which make test sets up: {unavailable()}"
    shutil.copytree(SHELL, folder)
    shutil.copy(go_program, folder)
    manifest = (folder / "openenv.toml").read_text()
    (folder / "openenv.toml").write_text(manifest[:manifest.index("[limits]")] + (limits or ""))
    return LocalServer(str(folder), 1, 10)


def shell(url: str, *commands: str) -> list[str]:
    async def main() -> list[str]:
        async with openenv_gym.connect(url) as conn:
            session = conn.session()
            await session.reset(options={"index": 0})
            said = [(await session.step(command))[0] for command in commands]
            await session.close()
            return said
    return asyncio.run(main())


def test_runtimes_that_reserve_address_space_start_under_the_default_limits_and_a_small_bound(go_program, tmp_path):
    for limits in (None, "[limits]\nmemory_mb = 512\n"):
        folder = tmp_path / str(bool(limits))
        with served(folder, limits, go_program) as server:
            assert shell(server.url, WASM, str(folder / "hello")) == ["exit 0\nwasm ok\n", "exit 0\ngo ok\n"], limits


def test_an_address_space_bound_would_refuse_them(go_program):
    """(What the bound was: the address space, of the default memory_mb for Node, of 512 MiB for Go; checked outside
    any sandbox.)"""
    node = subprocess.run(["prlimit", f"--as={4096 << 20}", "sh", "-c", WASM], capture_output=True, text=True,
                          timeout=60)
    go = subprocess.run(["prlimit", f"--as={512 << 20}", str(go_program)], capture_output=True, text=True, timeout=60)
    assert "Out of memory" in node.stdout and go.returncode != 0 and "failed to reserve" in go.stderr
