"""A single-tool answer checker with train and test splits, in the style of real ORS environments."""

from openreward.environments import Environment, TextBlock, ToolOutput, tool
from pydantic import BaseModel

TASKS = {
    "train": [{"question": "What is 2 + 3?", "answer": "5"}, {"question": "What is 7 * 6?", "answer": "42"},
              {"question": "Capital of France?", "answer": "paris"}],
    "test": [{"question": "What is 10 - 4?", "answer": "6"}],
}


class Answer(BaseModel):
    answer: str


class AnswerEnv(Environment):
    """Answer the question; the answer tool ends the episode."""

    def __init__(self, task_spec: dict = {}, secrets: dict[str, str] = {}) -> None:  # noqa: B006 (the SDK's own signature)
        super().__init__(task_spec)
        self.question = task_spec["question"]
        self.expected = task_spec["answer"]

    @classmethod
    def list_splits(cls):
        return ["train", "test"]

    @classmethod
    def list_tasks(cls, split: str):
        return TASKS[split]

    def get_prompt(self):
        return [TextBlock(text=self.question)]

    @tool
    def explain(self) -> ToolOutput:
        """A long text (10,000 characters: ORS servers send it in several SSE chunks)."""
        return ToolOutput(blocks=[TextBlock(text="".join(str(i % 10) for i in range(10_000)))])

    @tool
    def crash(self) -> ToolOutput:
        """A tool that raises."""
        raise RuntimeError("the tool broke")

    @tool
    def answer(self, params: Answer) -> ToolOutput:
        """Submit the final answer."""
        right = params.answer.strip().lower() == self.expected
        return ToolOutput(blocks=[TextBlock(text="correct" if right else "wrong")], reward=1.0 if right else 0.0,
                          finished=True)
