"""Procedural arithmetic tasks: only num_tasks/get_task (list_tasks cannot enumerate), against openreward."""

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

COUNT = 1_000_000


class Answer(BaseModel):
    value: int


class Sums(Environment):
    """Add two numbers; a million procedurally generated tasks per split."""

    def __init__(self, task_spec: dict = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006 (SDK signature)
        super().__init__(task_spec)
        self.a, self.b = task_spec["a"], task_spec["b"]

    @classmethod
    def list_splits(cls):
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str):
        raise NotImplementedError("a million tasks: use num_tasks and get_task")

    @classmethod
    async def num_tasks(cls, split: str) -> int:
        return COUNT

    @classmethod
    async def get_task(cls, split: str, index: int) -> dict:
        if not 0 <= index < COUNT:
            raise IndexError(index)
        offset = 0 if split == "train" else COUNT
        return {"a": (index + offset) * 7 % 1000, "b": (index + offset) * 13 % 1000}

    def get_prompt(self):
        return [TextBlock(text=f"What is {self.a} + {self.b}?")]

    @tool
    def submit(self, params: Answer) -> ToolOutput:
        """Submit the sum."""
        right = params.value == self.a + self.b
        return ToolOutput(blocks=[TextBlock(text="right" if right else "wrong")], reward=float(right), finished=True)
