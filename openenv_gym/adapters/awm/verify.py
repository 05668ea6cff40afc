"""Run AWM's verifiers never in the worker: in a child Python process with resource limits, a wall-clock timeout,
both databases read-only, and no process creation or network. Code mode: `verify_task_completion(initial_db_path,
final_db_path, final_answer)` says complete or not. SQL mode: `verify_task(initial_db_path, final_db_path)` gives
facts of both databases for an LLM judge (judge.py). As AWM's verify.py, the function called is the first the
code defines whose name starts with verify_, its arguments passed by the names it declares.

The verifier is LLM-written code. The child sets its rlimits (CPU seconds, address space, open files) before it
reads the code, opens the two databases read-only whatever the code asks, and refuses process creation and
sockets through an audit hook. That bounds an honest mistake (a loop, a huge query, a write) but is no sandbox
against hostile code: see the README's AWM section for what to add for untrusted data.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path

MEMORY_BYTES = 512 * 2**20
OPEN_FILES = 64
OUTPUT_BYTES = 2**20

RUNNER = r"""
import inspect, json, os, re, resource, sqlite3, sys

limits = json.loads(sys.argv[1])
resource.setrlimit(resource.RLIMIT_CPU, (limits["cpu"], limits["cpu"]))
resource.setrlimit(resource.RLIMIT_DATA, (limits["memory"], limits["memory"]))
resource.setrlimit(resource.RLIMIT_NOFILE, (limits["files"], limits["files"]))
payload = json.loads(sys.stdin.read())
databases = {payload["initial"], payload["final"]}
_connect = sqlite3.connect

def read_only(database, *args, **kwargs):
    if str(database) in databases:
        kwargs["uri"] = True
        return _connect(f"file:{database}?mode=ro", *args, **kwargs)
    return _connect(database, *args, **kwargs)

sqlite3.connect = read_only
REFUSED = ("os.fork", "os.forkpty", "os.system", "os.exec", "os.spawn", "os.posix_spawn", "subprocess.Popen",
           "socket.connect", "socket.bind", "socket.sendto", "socket.getaddrinfo", "os.kill", "os.remove",
           "os.rename", "shutil.rmtree")

def guard(event, args):
    if event.startswith(REFUSED):
        raise PermissionError(f"a verifier may not {event}")

sys.addaudithook(guard)
namespace = {"sqlite3": sqlite3, "json": json, "os": os, "re": re}
exec(compile(payload["code"], "verifier", "exec"), namespace)
# as AWM's verify.py: the first function whose line starts "def verify_" is called, else the mode's own
first = re.search(r"^[ \t]*def (verify_\w*)\s*\(", payload["code"], re.MULTILINE)
entry = namespace[first.group(1) if first else payload["entry"]]
# and its arguments go by the names it declares, else by position; only code mode is given the answer
answer = payload["answer"] if payload["entry"] == "verify_task_completion" else ""
given = {"initial_db_path": payload["initial"], "final_db_path": payload["final"], "final_answer": answer}
declared = inspect.signature(entry).parameters
named = {key: value for key, value in given.items() if key in declared}
result = entry(**named) if named or len(declared) < 2 else entry(*list(given.values())[:len(declared)])
sys.stdout.write("\n" + json.dumps({"result": result}) + "\n")
"""


CODE_ENTRY, SQL_ENTRY = "verify_task_completion", "verify_task"


@dataclass
class Verdict:
    complete: bool
    error: dict | None = None  # {"code": "verifier_error" | "verifier_timeout" | "judge_error", "message"}


async def verify(code: str, initial: Path, final: Path, answer: str, timeout: float) -> Verdict:
    """A code-mode verifier's verdict."""
    result, error = await run_verifier(code, CODE_ENTRY, initial, final, answer, timeout)
    if error is not None:
        return Verdict(False, error)
    outcome = result.get("result") if isinstance(result, dict) else result
    return Verdict(outcome == "complete")


async def run_verifier(code: str, entry: str, initial: Path, final: Path, answer: str,
                       timeout: float) -> tuple[object, dict | None]:
    """(what the verifier's `entry` returned, None) or (None, the typed error)."""
    # the CPU limit is a backstop past the wall clock (CPU time never exceeds it): a busy loop is a timeout
    limits = {"cpu": math.ceil(timeout) + 1, "memory": MEMORY_BYTES, "files": OPEN_FILES}
    payload = json.dumps({"code": code, "entry": entry, "initial": str(initial), "final": str(final),
                          "answer": answer})
    for path in (initial, final):
        path.chmod(0o444)
    child = await asyncio.create_subprocess_exec(
        sys.executable, "-I", "-c", RUNNER, json.dumps(limits), stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(timeout):
            out, err = await child.communicate(payload.encode())
    except TimeoutError:
        with contextlib.suppress(ProcessLookupError):
            child.kill()
        await child.wait()
        return None, {"code": "verifier_timeout", "message": f"the verifier ran past {timeout:g} s"}
    if child.returncode != 0:
        tail = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit status {child.returncode}"]
        return None, {"code": "verifier_error", "message": f"the verifier failed: {tail[0][:500]}"}
    try:
        return json.loads(out[-OUTPUT_BYTES:].decode(errors="replace").strip().splitlines()[-1])["result"], None
    except (ValueError, IndexError, KeyError):
        return None, {"code": "verifier_error", "message": "the verifier printed no result"}
