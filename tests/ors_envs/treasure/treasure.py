"""A multi-tool treasure hunt on a small grid with dense rewards, written against ors-sdk."""

import random

from ors import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

MOVES = {"north": (0, 1), "south": (0, -1), "east": (1, 0), "west": (-1, 0)}


class Move(BaseModel):
    direction: str


def distance(a, b):
    return abs(a[0] - b[0]) + abs(a[1] - b[1])


class TreasureHunt(Environment):
    """Find the treasure: move closer (+0.1), further (-0.1); dig on it (+1, ends) or elsewhere (-0.2)."""

    def __init__(self, task_spec: dict = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006 (SDK signature)
        super().__init__(task_spec)
        rng = random.Random(task_spec["seed"])
        self.size = task_spec["size"]
        self.position = (0, 0)
        self.treasure = (rng.randrange(self.size), rng.randrange(self.size))

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{"seed": i, "size": 4} for i in range(5)]

    def get_prompt(self):
        return [TextBlock(text=f"A treasure is buried on a {self.size}x{self.size} grid. You are at (0, 0).")]

    @tool
    def move(self, params: Move) -> ToolOutput:
        """Move one square: north, south, east or west."""
        if params.direction not in MOVES:
            return ToolOutput(blocks=[TextBlock(text=f"no direction {params.direction!r}")], reward=-0.05)
        dx, dy = MOVES[params.direction]
        new = (min(max(self.position[0] + dx, 0), self.size - 1), min(max(self.position[1] + dy, 0), self.size - 1))
        closer = distance(new, self.treasure) < distance(self.position, self.treasure)
        self.position = new
        return ToolOutput(blocks=[TextBlock(text=f"you are at {new}")], reward=0.1 if closer else -0.1)

    @tool
    def look(self) -> ToolOutput:
        """Say how far the treasure is (no reward)."""
        return ToolOutput(blocks=[TextBlock(text=f"the treasure is {distance(self.position, self.treasure)} away")])

    @tool
    def dig(self) -> ToolOutput:
        """Dig here: the episode ends if the treasure is here."""
        if self.position == self.treasure:
            return ToolOutput(blocks=[TextBlock(text="treasure!")], reward=1.0, finished=True)
        return ToolOutput(blocks=[TextBlock(text="nothing here")], reward=-0.2)
