"""Each action is a shell command the episode runs in its sandbox (Environment.run_code); "exit" ends the episode.
An action "file NAME TEXT" writes a file through run_code's `files` and shows it with cat."""

from openenv_gym import Environment, ResetResult, StepResult


class CodeRunner(Environment):
    name = "code_runner"

    async def reset(self, *, seed=None, options=None):
        return ResetResult("Send shell commands; 'exit' ends the episode.", {})

    async def step(self, action):
        if action == "exit":
            return StepResult("bye", 1.0, terminated=True)
        if action.startswith("file "):
            _, name, text = action.split(" ", 2)
            run = await self.run_code(["/bin/sh", "-c", f"cat {name}"], files={name: text})
        else:
            run = await self.run_code(["/bin/sh", "-c", action], timeout=3)
        return StepResult(f"exit {run.exit_code}\n{run.stdout}{run.stderr}", 0.0,
                          info={"timed_out": run.timed_out, "out_of_memory": run.out_of_memory})
