"""two-seats: an episode of two agents (seats), as code_golf, kuhn_poker and proposer_solver play theirs. Each
seat's run is a trace of its own, stamped with its seat, scored on its own reply and, when both have spoken,
against the other's.

A task's `mode` says how the seats play: "runs", one after the other (each an agent run on a task of its own, the
second told the first's reply); "turns", both held open as interactions, the env passing each reply to the other
(first, second, first again); "broken", the first seat's run, then the env raises (the episode fails, the first
seat's trace completed). `--env.second.model M` pins the second seat to a model of its own.
"""

import verifiers.v1 as vf

MODES = ("runs", "turns", "broken")


class SeatData(vf.TaskData):
    mode: str = "runs"


class SeatTask(vf.Task[SeatData]):
    @vf.reward
    async def said_yes(self, trace: vf.Trace) -> float:
        return float("yes" in (trace.last_reply or "").lower())


class TwoSeatsTaskset(vf.Taskset[SeatTask, vf.TasksetConfig]):
    def load(self) -> list[SeatTask]:
        return [SeatTask(SeatData(idx=i, name=f"{mode}-{i}", prompt=f"Question {i}: shall we play?", mode=mode),
                         self.config.task) for i, mode in enumerate(MODES)]


class TwoSeatsEnvConfig(vf.EnvConfig):
    first: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})
    second: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})


class TwoSeatsEnv(vf.Env[TwoSeatsEnvConfig]):
    async def run(self, task, agents):
        if task.data.mode == "turns":
            await self.converse(task, agents)
            return
        first = await agents.first.run(task)
        if task.data.mode == "broken":
            raise ValueError("the first seat's answer leaves the second nothing to do")
        told = SeatData(idx=task.data.idx, prompt=f"The first seat said: {first.last_reply}. Do you agree?")
        await agents.second.run(SeatTask(told))

    async def converse(self, task, agents):
        seat = vf.Task(vf.TaskData(idx=task.data.idx, prompt=None, system_prompt="Answer in a few words."))
        async with agents.first.interaction(seat) as first, agents.second.interaction(seat) as second:
            said = (await first.turn(task.data.prompt)).last_reply
            said = (await second.turn(f"The first seat said: {said}")).last_reply
            await first.turn(f"The second seat said: {said}")
        for trace in (first.trace, second.trace):
            trace.record_metric("replies", float(len(trace.calls)))

    async def finalize(self, task, episode):
        replies = [trace.last_reply or "" for trace in episode.traces]
        agreed = float(len(replies) == 2 and all("yes" in reply.lower() for reply in replies))
        for trace in episode.traces:
            trace.record_reward("agreed", agreed, weight=0.5)
            trace.info["seats"] = len(replies)
