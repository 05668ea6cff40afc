"""Guess the number: the environment answers each <guess> with higher/lower and the range left.

Like many hub game environments, the move is judged inside the @vf.stop method (which runs once per
turn, right after the model's reply); env_response then reports the verdict. All per-episode data
lives in `state`, so concurrent rollouts never see each other's game.
"""

import verifiers as vf
from datasets import Dataset

INTRO = "I am thinking of a number between {low} and {high}. Reply with your guess as <guess>N</guess>."


class GuessingGame(vf.MultiTurnEnv):
    """Guess a secret number; the reply says higher or lower."""

    def __init__(self, low: int, high: int, **kwargs):
        super().__init__(**kwargs)
        self.low, self.high = low, high

    async def setup_state(self, state, **kwargs):
        state["range"] = [self.low, self.high]
        state["guesses"] = []
        state["solved"] = False
        state["verdict"] = ""
        return state

    @vf.stop
    async def solved(self, state, **kwargs) -> bool:
        if not state["trajectory"]:
            return False
        secret = int(state["answer"])
        low, high = state["range"]
        guess = self.parser.parse_answer(state["trajectory"][-1]["completion"])
        if guess is None or not guess.strip().lstrip("-").isdigit():
            state["verdict"] = f"Reply with <guess>N</guess>. The number is between {low} and {high}."
            return False
        value = int(guess)
        state["guesses"].append(value)
        if value == secret:
            state["solved"] = True
            return True
        if value < secret:
            low = max(low, value + 1)
            state["verdict"] = f"Too low. The number is between {low} and {high}."
        else:
            high = min(high, value - 1)
            state["verdict"] = f"Too high. The number is between {low} and {high}."
        state["range"] = [low, high]
        return False

    async def env_response(self, messages, state, **kwargs):
        return [vf.UserMessage(content=state["verdict"])]


def load_environment(num_rows: int = 50, low: int = 1, high: int = 100, max_turns: int = 10,
                     timeout_seconds: float | None = None, group_reward: bool = False):
    """group_reward: the rubric also has a group reward function (GRPO groups: the fewest guesses of the group win)."""
    parser = vf.XMLParser(["guess"], answer_field="guess")
    rows = [{"question": INTRO.format(low=low, high=high), "answer": str(low + (i * 37) % (high - low + 1))}
            for i in range(num_rows)]

    def solved_reward(state, **kwargs) -> float:
        return 1.0 if state["solved"] else 0.0

    def speed_reward(state, **kwargs) -> float:
        return 1.0 - len(state["trajectory"]) / (max_turns + 1) if state["solved"] else 0.0

    def fewest_guesses(states) -> list[float]:
        turns = [len(state["trajectory"]) if state["solved"] else None for state in states]
        best = min((n for n in turns if n is not None), default=None)
        return [float(n is not None and n == best) for n in turns]

    funcs, weights = [solved_reward, speed_reward], [1.0, 0.5]
    if group_reward:
        funcs, weights = [*funcs, fewest_guesses], [*weights, 0.25]
    rubric = vf.Rubric(funcs=funcs, weights=weights, parser=parser)
    return GuessingGame(low, high, dataset=Dataset.from_list(rows), parser=parser, rubric=rubric,
                        max_turns=max_turns, timeout_seconds=timeout_seconds)
