"""word-echo: the model is asked to repeat a word; one turn, scored from the trace alone."""

import verifiers.v1 as vf

WORDS = ["apple", "river", "stone", "cloud", "ember", "maple"]
SYSTEM = "Reply with the word you are given, and nothing else."


class WordEchoData(vf.TaskData):
    answer: str
    """The word itself: what a correct reply is."""


class WordEchoTask(vf.Task[WordEchoData]):
    @vf.stop
    async def one_turn(self, trace: vf.Trace) -> bool:
        return trace.num_turns >= 1

    @vf.reward(weight=1.0)
    async def exact(self, trace: vf.Trace) -> float:
        return float((trace.last_reply or "").strip().lower() == self.data.answer)

    @vf.reward(weight=0.5)
    async def mentions(self, trace: vf.Trace) -> float:
        return float(self.data.answer in (trace.last_reply or "").lower())

    @vf.metric
    async def reply_chars(self, trace: vf.Trace) -> float:
        return float(len(trace.last_reply or ""))

    @vf.metric
    async def reasoning_chars(self, trace: vf.Trace) -> float:
        """How much reasoning verifiers read from the model's replies (a thinking model's, as a reasoning parser
        gives it)."""
        return float(sum(len(message.reasoning_content or "") for message in trace.assistant_messages))


class WordEchoTaskset(vf.Taskset[WordEchoTask, vf.TasksetConfig]):
    def load(self) -> list[WordEchoTask]:
        return [WordEchoTask(WordEchoData(idx=i, name=word, prompt=f"The word is: {word}", system_prompt=SYSTEM,
                                          answer=word), self.config.task)
                for i, word in enumerate(WORDS)]
