"""The ORS benchmark environment (openreward): an episode is ten calls of `increment`, 0.1 reward each."""

from openreward.environments import Environment, TextBlock, ToolOutput, tool

EPISODE_STEPS = 10


class Counter(Environment):
    """Call increment ten times."""

    def __init__(self, task_spec: dict = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006 (SDK signature)
        super().__init__(task_spec)
        self.count = 0

    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split: str):
        return [{"id": i} for i in range(100)]

    def get_prompt(self):
        return [TextBlock(text="Count to ten.")]

    @tool
    async def increment(self) -> ToolOutput:
        """Add one."""
        self.count += 1
        return ToolOutput(blocks=[TextBlock(text=str(self.count))], reward=0.1, finished=self.count >= EPISODE_STEPS)
