"""OpenEnv's side of `benchmarks.trl_step`: TRL's GRPOTrainer with an environment_factory class written the way
TRL's OpenEnv docs show, one OpenEnv client per rollout, against OpenEnv's own server. Runs in the OpenEnv venv
(openenv 0.10.0, TRL and a CPU torch), from the repository root:

    python -m benchmarks.openenv_trl_peer --batch 64 --steps 3

The env is `guess` written for OpenEnv (the rules of servers/guess: the same rewards), served by create_app +
uvicorn (--workers N) with `max_concurrent_envs` = the batch, as TRL's docs require. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # openenv_peer, as uvicorn imports it: by file
from openenv_peer import MAX_SESSIONS_ENV, concurrent_env_base, uvicorn_server

URL_ENV = "OPENENV_TRL_PEER_URL"


def make_app():
    """The app factory uvicorn imports: guess as an OpenEnv environment."""
    from openenv.core.env_server.http_server import create_app
    from openenv.core.env_server.types import Action, Observation

    class GuessAction(Action):
        tool: str
        number: int | None = None

    class GuessObservation(Observation):
        text: str = ""

    class GuessEnv(concurrent_env_base()):
        def reset(self, seed=None, episode_id=None, **kwargs):
            self._begin(episode_id)
            self.secret, self.low, self.high, self.guesses = random.Random(seed).randint(1, 100), 1, 100, 0
            return GuessObservation(text="I am thinking of an integer between 1 and 100. Find it. "
                                         "Tools: guess(number), divisible_by(divisor), give_up().")

        def step(self, action, timeout_s=None, **kwargs):
            self._count()
            if action.tool == "give_up":
                return GuessObservation(text=f"The number was {self.secret}.", reward=0.0, done=True)
            self.guesses += 1
            number = action.number
            if number == self.secret:
                reward = max(0.2, 1.0 - 0.05 * (self.guesses - 1))
                return GuessObservation(text=f"{number} is correct!", reward=reward, done=True)
            inside = self.low <= number <= self.high
            if number < self.secret:
                self.low, hint = max(self.low, number + 1), "higher"
            else:
                self.high, hint = min(self.high, number - 1), "lower"
            return GuessObservation(text=f"The number is {hint} than {number}.", reward=0.02 if inside else -0.05)

    return create_app(GuessEnv, GuessAction, GuessObservation, env_name="guess",
                      max_concurrent_envs=int(os.environ[MAX_SESSIONS_ENV]))


class GuessToolEnv:
    """An environment_factory class as TRL's OpenEnv docs write one: an OpenEnv client per instance, made in
    reset, and one method per tool."""

    def __init__(self):
        self.client = None
        self.rewards: list[float] = []

    def reset(self, **kwargs) -> str:
        from openenv.core.generic_client import GenericEnvClient

        if self.client is None:
            self.client = GenericEnvClient(base_url=os.environ[URL_ENV])
        result = self.client.reset(seed=kwargs.get("seed"))
        self.rewards = []
        return result.observation["text"]

    def guess(self, number: int) -> str:
        """Guess the number. Answers higher, lower, or correct (which ends the episode).

        Args:
            number: the guess
        """
        return self._step({"tool": "guess", "number": number})

    def give_up(self) -> str:
        """Stop and reveal the number. Ends the episode with no reward."""
        return self._step({"tool": "give_up"})

    def get_reward(self) -> float:
        return float(sum(self.rewards))

    def _step(self, action: dict) -> str:
        result = self.client.step(action)
        self.rewards.append(float(result.reward or 0.0))
        return result.observation["text"]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    from benchmarks.trl_scripted import train  # here: uvicorn imports this module for make_app, without TRL

    with uvicorn_server("openenv_trl_peer:make_app", {MAX_SESSIONS_ENV: str(args.batch)}, args.workers) as (_, url):
        os.environ[URL_ENV] = url
        result = train(args.batch, args.steps, lambda policy: {"environment_factory": GuessToolEnv})
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
