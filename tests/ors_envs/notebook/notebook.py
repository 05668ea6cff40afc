"""Per-session state made in an async setup and dropped in an async teardown, against ors-sdk.

Secrets reach the constructor; the env keeps one for its tools without ever showing its value.
"""

import asyncio

from ors import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

TEARDOWNS: list[str] = []  # module-level on purpose: shared by every session of this process


class Note(BaseModel):
    text: str


class Notebook(Environment):
    """Write notes and read them back; the notes live only as long as the session."""

    def __init__(self, task_spec: dict = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006 (SDK signature)
        super().__init__(task_spec)
        self.owner = task_spec["owner"]
        self.has_key = bool(secrets.get("API_KEY"))
        self.notes: list[str] | None = None

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{"owner": name} for name in ("ada", "bob", "cy")]

    async def setup(self):
        await asyncio.sleep(0.01)
        self.notes = []

    async def teardown(self):
        await asyncio.sleep(0)
        TEARDOWNS.append(self.owner)

    def get_prompt(self):
        return [TextBlock(text=f"Notebook of {self.owner}. API key given: {self.has_key}.")]

    @tool
    async def write(self, params: Note) -> ToolOutput:
        """Add a note."""
        self.notes.append(params.text)
        return ToolOutput(blocks=[TextBlock(text=f"{len(self.notes)} notes")], reward=0.1)

    @tool
    def read(self) -> ToolOutput:
        """Read all notes of this session, and how many teardowns this process has seen."""
        return ToolOutput(blocks=[TextBlock(text=" | ".join(self.notes) + f" (teardowns: {len(TEARDOWNS)})")])

    @tool
    def done(self) -> ToolOutput:
        """End the session."""
        return ToolOutput(blocks=[TextBlock(text="bye")], reward=1.0, finished=True)
