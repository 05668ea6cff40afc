"""Real CLI agents from the npm registry as environments, each a manifest of a few lines (servers/codex_agent,
servers/claude_agent): Codex CLI speaks the Responses API to its episode's endpoint, Claude Code Anthropic's
Messages API; each is given a small task in a sandboxed episode, the shell command the policy calls runs there, the
CLI's end ends the episode, and its reward is computed from the trace.
"""

import pytest
from conftest import ROOT
from conftest import play_episode as play
from tool_shape import names_of

from openenv_gym.sandbox import unavailable

pytestmark = pytest.mark.skipif(unavailable() is not None, reason="needs the sandbox (make test sets it up)")

AGENTS = {"codex": ("responses", "exec_command", "cmd"), "claude": ("anthropic", "Bash", "command")}


@pytest.mark.parametrize("agent", sorted(AGENTS))
def test_a_cli_agent_plays_a_task_in_its_sandbox_through_its_own_api(start_server, agent):
    dialect, shell, argument = AGENTS[agent]
    url = start_server(str(ROOT / "servers" / f"{agent}_agent"))
    command = {"name": shell, "arguments": {argument: "echo hello > out.txt && cat out.txt && pwd"}}
    (obs, info), ran, (_, reward, terminated, truncated, end) = play(url, [command, "Done."], {"index": 0})
    assert info["dialect"] == dialect and shell in names_of(info["tools"])
    assert "Write the word hello into a file named out.txt" in obs
    assert ran[0].split("hello\n", 1)[1].startswith("/tmp/work")  # (its sandbox's working directory)
    assert ran[1:4] == (0.0, False, False) and ran[4]["messages"][-1]["role"] == "tool"
    assert (reward, terminated, truncated, end["exit_code"]) == (1.0, True, False, 0), end
    assert "endpoint_errors" not in end
