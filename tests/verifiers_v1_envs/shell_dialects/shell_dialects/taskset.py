"""shell-dialects: a note holds a word; the agent reads it with its shell tool and writes the word in capitals to
answer.txt. Scored from the runtime's files (what the shell calls did) and from the last reply."""

import verifiers.v1 as vf

WORDS = ["apple", "river", "stone"]
SYSTEM = "You have a shell tool. Use it to do the task, then say what you did in one line."


class ShellDialectsData(vf.TaskData):
    answer: str
    """The note's word: answer.txt should hold it in capitals."""


class ShellDialectsTask(vf.Task[ShellDialectsData]):
    async def setup(self, trace: vf.Trace, runtime: vf.Runtime) -> None:
        await runtime.write("note.txt", f"{self.data.answer}\n".encode())

    @vf.reward(weight=1.0)
    async def wrote_answer(self, trace: vf.Trace, runtime: vf.Runtime) -> float:
        try:
            written = (await runtime.read("answer.txt")).decode().strip()
        except Exception:  # a missing file (whatever the runtime raises for it) is no answer
            return 0.0
        return float(written == self.data.answer.upper())

    @vf.reward(weight=0.5)
    async def said_it(self, trace: vf.Trace) -> float:
        return float(self.data.answer.upper() in (trace.last_reply or ""))

    @vf.metric
    async def reasoning_chars(self, trace: vf.Trace) -> float:
        """How much reasoning verifiers read from the model's replies (a thinking model's, as a reasoning parser
        gives it)."""
        return float(sum(len(message.reasoning_content or "") for message in trace.assistant_messages))


class ShellDialectsTaskset(vf.Taskset[ShellDialectsTask, vf.TasksetConfig]):
    def load(self) -> list[ShellDialectsTask]:
        return [ShellDialectsTask(ShellDialectsData(
            idx=i, name=word, system_prompt=SYSTEM, answer=word,
            prompt="note.txt holds a word. Write it in capitals to answer.txt."), self.config.task)
            for i, word in enumerate(WORDS)]
