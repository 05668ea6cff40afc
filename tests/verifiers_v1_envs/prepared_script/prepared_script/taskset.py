"""prepared-script: an Env that prepares a uv script (PEP 723) when it starts, in a runtime of its own, as Verifiers'
NeMoGymEnv prepares its resource server; the script needs a package its venv lacks (termcolor), so uv installs it.
Each episode runs the script in that runtime and asks the model to repeat the line it printed.

`--env.escape-to PATH`: a file the script tries to write besides (a runtime that confines its programs keeps it
from the host's files).
"""

import verifiers.v1 as vf
from verifiers.v1.runtimes import SubprocessConfig, make_runtime

SCRIPT = b"""# /// script
# dependencies = ["termcolor>=2"]
# ///
import sys
from importlib.metadata import version

import termcolor

if len(sys.argv) > 1 and sys.argv[1]:
    try:
        with open(sys.argv[1], "w") as escaped:
            escaped.write("written by the script")
    except OSError:
        pass
print(termcolor.colored(f"termcolor {version('termcolor')} says hello", None))
"""


class EchoData(vf.TaskData):
    line: str = ""


class EchoTask(vf.Task[EchoData]):
    @vf.reward
    async def repeated(self, trace: vf.Trace) -> float:
        return float(self.data.line in (trace.last_reply or ""))


class ScriptTaskset(vf.Taskset[EchoTask, vf.TasksetConfig]):
    def load(self) -> list[EchoTask]:
        return [EchoTask(EchoData(idx=i, prompt=None), self.config.task) for i in range(2)]


class ScriptEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})
    escape_to: str = ""


class ScriptEnv(vf.Env[ScriptEnvConfig]):
    async def start(self) -> None:
        await super().start()
        self.runtime = make_runtime(SubprocessConfig())
        await self.runtime.start()
        self.program = await self.runtime.prepare_uv_script(SCRIPT)

    async def stop(self) -> None:
        await self.runtime.stop()
        await super().stop()

    async def run(self, task, agents):
        said = await self.runtime.run([*self.program, self.config.escape_to], {})
        if said.exit_code != 0:
            raise RuntimeError(f"the prepared script failed ({said.exit_code}): {said.stderr[-1000:]}")
        line = said.stdout.strip()
        await agents.player.run(EchoTask(EchoData(idx=task.data.idx, prompt=f"Repeat exactly: {line}", line=line)))
