"""guess: find a hidden integer with tools.

Tools:
- guess(number): "higher" / "lower", or "correct", which ends the episode;
- divisible_by(divisor): says whether the number is divisible by divisor (2..20), costs 0.02;
- give_up(): ends the episode and reveals the number.

Reward: a correct guess pays 1.0 minus 0.05 per earlier guess (at least 0.2); each guess that narrows
the remaining range pays a little (0.02), a guess outside the known range costs 0.05, an invalid
action costs 0.05. The episode is truncated after max_steps (20; the server enforces it). Reset options:
low (1), high (100), max_steps.
"""

from __future__ import annotations

import random

from openenv_gym import BadRequestError, ResetResult, StepResult, ToolEnvironment, tool


def _int_option(options: dict, key: str, default: int) -> int:
    value = options.get(key, default)
    if type(value) is not int:
        raise BadRequestError(f"option {key} must be an integer, got {value!r}")
    return value


class GuessEnv(ToolEnvironment):
    """Find a hidden number with guess, divisible_by and give_up."""

    name = "guess"
    max_steps = 20
    invalid_action_reward = -0.05
    reset_options = frozenset({"low", "high"})

    def start(self, *, seed, options) -> ResetResult:
        low, high = _int_option(options, "low", 1), _int_option(options, "high", 100)
        if high <= low:
            raise BadRequestError(f"options need low < high, got low={low}, high={high}")
        self.secret = random.Random(seed).randint(low, high)
        self.known_low, self.known_high = low, high
        self.guesses = 0
        prompt = (f"I am thinking of an integer between {low} and {high}. Find it. "
                  "Tools: guess(number), divisible_by(divisor), give_up().")
        return ResetResult(prompt, {"low": low, "high": high})

    @tool
    def guess(self, number: int) -> StepResult:
        """Guess the number. Answers higher, lower, or correct (which ends the episode)."""
        self.guesses += 1
        if number == self.secret:
            reward = max(0.2, 1.0 - 0.05 * (self.guesses - 1))
            return StepResult(f"{number} is correct!", reward, True, info={"guesses": self.guesses})
        inside = self.known_low <= number <= self.known_high
        if number < self.secret:
            self.known_low = max(self.known_low, number + 1)
            hint = "higher"
        else:
            self.known_high = min(self.known_high, number - 1)
            hint = "lower"
        return StepResult(f"The number is {hint} than {number}.", 0.02 if inside else -0.05)

    @tool
    def divisible_by(self, divisor: int) -> StepResult:
        """Ask whether the number is divisible by divisor (between 2 and 20). Costs 0.02."""
        if not 2 <= divisor <= 20:
            return StepResult(f"divisor must be between 2 and 20, got {divisor}.", -0.05)
        answer = "is" if self.secret % divisor == 0 else "is not"
        return StepResult(f"The number {answer} divisible by {divisor}.", -0.02)

    @tool
    def give_up(self) -> StepResult:
        """Stop and reveal the number. Ends the episode with no reward."""
        return StepResult(f"The number was {self.secret}.", 0.0, True, info={"secret": self.secret})

    def extras(self) -> dict:
        """What state() tells: the range known so far and the guesses made (never the number)."""
        return {"known_low": self.known_low, "known_high": self.known_high, "guesses": self.guesses}
