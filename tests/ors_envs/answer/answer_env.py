"""A single-tool answer checker with train and test splits, in the style of real ORS environments."""

from openreward.environments import Environment, ListToolsOutput, TextBlock, ToolOutput, ToolSpec, tool
from pydantic import BaseModel

TASKS = {
    "train": [{"question": "What is 2 + 3?", "answer": "5"}, {"question": "What is 7 * 6?", "answer": "42"},
              {"id": "france", "question": "Capital of France?", "answer": "paris"}],  # a task may have an id
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

    def list_task_tools(self) -> ListToolsOutput:
        """A task with a hint offers the task-only `hint` tool."""
        if "hint" not in self.task_spec:
            return ListToolsOutput(tools=[])
        return ListToolsOutput(tools=[ToolSpec(name="hint", description="A hint for this task.", input_schema=None)])

    @tool(shared=False)
    def hint(self) -> ToolOutput:
        """A hint for this task (a task-only tool: listed by list_task_tools, not list_tools)."""
        return ToolOutput(blocks=[TextBlock(text=self.task_spec["hint"])])

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
