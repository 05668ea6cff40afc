"""The quiz environment. A reset that names a dataset builds it from the seed and the size it is given (both
required then), as reasoning_gym's does; a reset that names none asks the next question of the dataset it has
(a default one at first). The answer ends the episode: reward 1 if right, else 0."""

import random
from uuid import uuid4

from openenv.core.env_server.interfaces import Environment
from openenv.core.env_server.types import State

try:
    from ..models import QuizAction, QuizObservation
except ImportError:
    from models import QuizAction, QuizObservation

DATASETS = ("sums", "products")


def _dataset(name: str, seed: int, size: int) -> list[tuple[str, str]]:
    draw = random.Random(seed)
    pairs = [(draw.randint(2, 99), draw.randint(2, 99)) for _ in range(size)]
    if name == "sums":
        return [(f"What is {a} + {b}?", str(a + b)) for a, b in pairs]
    return [(f"What is {a} * {b}?", str(a * b)) for a, b in pairs]


class QuizEnvironment(Environment[QuizAction, QuizObservation, State]):
    SUPPORTS_CONCURRENT_SESSIONS: bool = True

    def __init__(self) -> None:
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._name, self._questions, self._next, self._answer = "", [], 0, ""

    def reset(self, dataset_name: str | None = None, seed: int | None = None, size: int | None = None,
              episode_id: str | None = None) -> QuizObservation:
        if dataset_name is not None:
            if dataset_name not in DATASETS:
                raise ValueError(f"unknown dataset {dataset_name!r}")
            if seed is None or size is None:
                raise ValueError("seed and size must be provided when dataset_name is specified")
            self._name, self._questions, self._next = dataset_name, _dataset(dataset_name, seed, size), 0
        elif not self._questions:
            self._name, self._questions, self._next = "sums", _dataset("sums", 42, 100), 0
        question, self._answer = self._questions[self._next % len(self._questions)]
        self._next += 1
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        return QuizObservation(question=question, dataset=self._name, reward=None)

    def step(self, action: QuizAction) -> QuizObservation:  # type: ignore[override]
        self._state.step_count += 1
        right = action.answer.strip() == self._answer
        return QuizObservation(question="", dataset=self._name, reward=1.0 if right else 0.0, done=True)

    @property
    def state(self) -> State:
        return self._state
