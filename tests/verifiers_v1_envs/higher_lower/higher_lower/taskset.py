"""higher-lower: the env plays the user (agent.interaction), answering each guess with higher or lower.

The reward is recorded by the env when the game ends: 1.0 for a find, less for each guess it took, 0.0 past the
allowed guesses; the guesses are a metric. The Env's own config sets the guesses allowed (`--env.max-guesses`), the
taskset's the secrets (`--env.taskset.secrets`).
"""

import re

import verifiers.v1 as vf

RULES = "I am thinking of a whole number from 1 to 100. Guess it: reply with a number. I will say higher or lower."
MAX_GUESSES = 6


class HigherLowerData(vf.TaskData):
    secret: int


class HigherLowerTask(vf.Task[HigherLowerData]):
    pass


class HigherLowerConfig(vf.TasksetConfig):
    secrets: list[int] = [37, 82, 5, 50]


class HigherLowerTaskset(vf.Taskset[HigherLowerTask, HigherLowerConfig]):
    def load(self) -> list[HigherLowerTask]:
        return [HigherLowerTask(HigherLowerData(idx=i, name=f"secret-{secret}", prompt=None, system_prompt=RULES,
                                                secret=secret), self.config.task)
                for i, secret in enumerate(self.config.secrets)]


class HigherLowerEnvConfig(vf.EnvConfig):
    player: vf.AgentConfig = vf.AgentConfig(harness={"id": "null"})
    max_guesses: int = MAX_GUESSES


class HigherLowerEnv(vf.Env[HigherLowerEnvConfig]):
    async def run(self, task, agents):
        secret, guesses, found = task.data.secret, 0, False
        if not 1 <= secret <= 100:  # (a run that raises: the episode fails, its error said)
            raise ValueError(f"the secret {secret} is not a number from 1 to 100")
        message = "Your first guess?"
        async with agents.player.interaction(vf.Task(vf.TaskData(idx=task.data.idx, prompt=None,
                                                                 system_prompt=RULES))) as player:
            while guesses < self.config.max_guesses:
                segment = await player.turn(message)
                if segment.terminated:
                    break
                guesses += 1
                numbers = re.findall(r"-?\d+", segment.last_reply or "")
                if not numbers:
                    message = "That is not a number. Reply with a number."
                    continue
                guess = int(numbers[-1])
                if guess == secret:
                    found = True
                    break
                message = "Higher." if guess < secret else "Lower."
        trace = player.trace
        trace.record_reward("found", (1.0 - 0.1 * (guesses - 1)) if found else 0.0)
        trace.record_metric("guesses", float(guesses))
