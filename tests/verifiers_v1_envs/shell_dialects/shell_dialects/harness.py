"""A harness whose program speaks the OpenAI Responses API (the `openai` package's `responses`) or Anthropic
Messages (the `anthropic` package's `messages`), streamed or not, with one tool, `shell`, run in the runtime."""

from pathlib import Path
from typing import Literal

import verifiers.v1 as vf

PROGRAM = (Path(__file__).parent / "program.py").read_text()


class ShellDialectsHarnessConfig(vf.HarnessConfig):
    dialect: Literal["responses", "anthropic"] = "responses"
    stream: bool = False
    max_turns: int = 8


class ShellDialectsHarness(vf.Harness[ShellDialectsHarnessConfig]):
    APPENDS_SYSTEM_PROMPT = True
    NEEDS_CONTAINER = False

    async def setup(self, runtime: vf.Runtime) -> None:
        await runtime.prepare_uv_script(PROGRAM, self.config.resolved_env)

    async def launch(self, ctx, trace, runtime, endpoint, secret, mcp_urls, data, **_) -> vf.ProgramResult:
        system, prompt = self.resolve_text_prompt(data)
        program = await runtime.prepare_uv_script(PROGRAM, self.config.resolved_env)
        args = [f"--base-url={endpoint}", f"--api-key={secret}", f"--model={ctx.model}",
                f"--dialect={self.config.dialect}", f"--max-turns={self.config.max_turns}", f"--prompt={prompt}",
                *(["--stream"] if self.config.stream else []), *([f"--system={system}"] if system else [])]
        return await runtime.run_program([*program, *args], dict(self.config.resolved_env))
