"""A single-turn environment whose rows carry a plain-string `task` (a route name), as many hub
environments' rows do. verifiers 0.1.11 and 0.1.12 pass it to reward functions; 0.1.14 and later
refuse such rows (they expect a JSON object there)."""

import verifiers as vf
from datasets import Dataset


def load_environment():
    rows = [{"question": "Say hello.", "answer": "hello", "task": "greet"},
            {"question": "Say goodbye.", "answer": "goodbye", "task": "part"}]

    def routed_reward(completion, answer, task, **kwargs) -> float:
        said = completion[-1]["content"].lower()
        return 1.0 if task in ("greet", "part") and answer in said else 0.0

    return vf.SingleTurnEnv(dataset=Dataset.from_list(rows), rubric=vf.Rubric(funcs=[routed_reward]))
