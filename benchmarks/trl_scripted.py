"""A real GRPOTrainer whose generation is replaced by a scripted policy at zero cost, so that what a training
step spends in its rollout phase is the env path: resets, tool calls, the env's messages as tokens, rewards.

Shared by both sides of `benchmarks.trl_step` (ours, and OpenEnv's run in its own venv), so it imports nothing
of openenv_gym. The policy plays the same moves everywhere: guess 50, 25, 75, then give up (an episode ends
earlier when a guess is right). Its move is read from the tokens so far: the number of tool results in them.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import inspect
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # no hub here: no telemetry thread retrying in the background
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")  # the trainer's torch on one core: the env servers get the others

from datasets import Dataset
from transformers import PrinterCallback
from trl import GRPOConfig, GRPOTrainer

from examples.tiny_model import build_model, build_tokenizer, tool_call_text

MOVES = [("guess", {"number": 50}), ("guess", {"number": 25}), ("guess", {"number": 75}), ("give_up", {})]
CALLS = [tool_call_text(name, arguments) for name, arguments in MOVES]
MAX_TURNS = len(MOVES)
COMPLETION_BUDGET = 256


class ScriptedPolicy:
    """(sequence of token ids) -> the next move's tokens: one tool-call token and the end token."""

    def __init__(self, tokenizer: Any) -> None:
        self.calls = tokenizer.convert_tokens_to_ids(CALLS)
        self.result_marker = tokenizer.convert_tokens_to_ids("<tool_response>")
        self.eos = tokenizer.eos_token_id

    def move(self, sequence: list[int]) -> list[int]:
        answered = sequence.count(self.result_marker)
        return [self.calls[min(answered, len(self.calls) - 1)], self.eos]

    def generate(self, sequences: list[list[int]], max_new_tokens: int) -> list[tuple[list[int], list[float]]]:
        """The engine of make_rollout_func(generate=...)."""
        return [(ids[:max_new_tokens], [0.0] * min(len(ids), max_new_tokens))
                for ids in (self.move(s) for s in sequences)]


class EnvClock:
    """Seconds the trainer spends waiting on the env: inside the env class's methods (environment_factory), or
    what the rollout function reports as its env time (its `timings["env_s"]`: the vector client's calls)."""

    def __init__(self) -> None:
        self.seconds = 0.0

    def timed_class(self, env_class: type) -> type:
        """A subclass of an environment_factory class whose reset, tools and get_reward are timed."""
        clock = self

        def timed(method: Callable) -> Callable:
            @functools.wraps(method)
            def call(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                try:
                    return method(*args, **kwargs)
                finally:
                    clock.seconds += time.perf_counter() - started
            return call

        public = {name: timed(member) for name, member in inspect.getmembers(env_class, inspect.isfunction)
                  if not name.startswith("_")}
        return type(env_class.__name__, (env_class,), public)

    def timed_rollout_func(self, rollout_func: Callable) -> Callable:
        def call(prompts: list, trainer: Any) -> dict:
            output = rollout_func(prompts, trainer)
            self.seconds += rollout_func.timings["env_s"]
            return output
        return call


def _give_back_freed_memory() -> None:
    """glibc's malloc_trim (benchmarks run where openenv_gym is not installed, so runtime/memory.py is out of reach)."""
    with contextlib.suppress(OSError, AttributeError):  # not glibc: nothing deferred to give back
        ctypes.CDLL("libc.so.6").malloc_trim(0)


class ScriptedGRPOTrainer(GRPOTrainer):
    """GRPOTrainer with scripted generation, timing each step's rollout phase (`_generate_and_score_completions`:
    prompts, generation, tool calls or the rollout function, rewards)."""

    policy: ScriptedPolicy
    clock: EnvClock
    phase_seconds: list[float]
    env_seconds: list[float]

    def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations, has_tool_images=False):
        return [self.policy.move(list(ids)) for ids in prompt_ids], None

    def _generate_and_score_completions(self, inputs):
        # The training step just freed hundreds of MB of the heap, which glibc gives back to the kernel at the
        # next free() that finds it: tens of ms of kernel time landing in whatever runs next, the env clock of any
        # system. Given back here, before the clocks start, it is left out of every side alike.
        _give_back_freed_memory()
        started, waited = time.perf_counter(), self.clock.seconds
        try:
            return super()._generate_and_score_completions(inputs)
        finally:
            self.phase_seconds.append(time.perf_counter() - started)
            self.env_seconds.append(self.clock.seconds - waited)


def rows(batch: int, group: int) -> Dataset:
    """batch / group tasks (seeds), each row naming its task for both TRL paths (the `seed` column for
    environment_factory's reset, and the message's `task` for a rollout function)."""
    return Dataset.from_list([{"prompt": [{"role": "user", "content": "", "task": {"seed": seed}}], "seed": seed}
                              for seed in range(batch // group)])


def train(batch: int, steps: int, env_kwargs: Callable[[ScriptedPolicy], dict[str, Any]],
          group: int = 8) -> dict[str, Any]:
    """Train `steps` steps of `batch` rollouts with the trainer arguments `env_kwargs(policy)` gives (the env
    path: environment_factory, or rollout_func and reward_funcs); the rollout phase's seconds per step (the
    first, warm-up, left out), the seconds of it spent waiting on the env, and the mean reward logged."""
    tokenizer = build_tokenizer(CALLS)
    policy, clock = ScriptedPolicy(tokenizer), EnvClock()
    env = env_kwargs(policy)
    if "environment_factory" in env:
        env["environment_factory"] = clock.timed_class(env["environment_factory"])
    if "rollout_func" in env:
        env["rollout_func"] = clock.timed_rollout_func(env["rollout_func"])
    args = GRPOConfig(output_dir="/tmp/openenv-gym-trl-bench", use_cpu=True, bf16=False,
                      activation_checkpointing=False, per_device_train_batch_size=batch, num_generations=group,
                      max_completion_length=COMPLETION_BUDGET, max_tool_calling_iterations=MAX_TURNS,
                      max_steps=steps + 1, logging_steps=1, report_to="none", save_strategy="no", disable_tqdm=True)
    trainer = ScriptedGRPOTrainer(model=build_model(tokenizer), processing_class=tokenizer, args=args,
                                  train_dataset=rows(batch, group), **{"reward_funcs": []} | env)
    trainer.policy, trainer.clock, trainer.phase_seconds, trainer.env_seconds = policy, clock, [], []
    trainer.remove_callback(PrinterCallback)
    trainer.train()
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    return {"batch": batch, "steps": steps, "env_s": statistics.median(trainer.env_seconds[1:]),
            "phase_s": statistics.median(trainer.phase_seconds[1:]), "env_s_all": trainer.env_seconds[1:],
            "mean_reward": statistics.fmean(rewards)}
