"""Closing what TRL never closes: every session of the integration ends when training ends or the process exits.

TRL's GRPOTrainer pools environment instances and never closes them. The integration records what it opens
here, and closes it all from a TrainerCallback's `on_train_end`. The callback is added to the trainer that makes
instances or calls the rollout function (found on the stack, see `calling_trainer`); an `atexit` hook closes
what is left at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import threading
import weakref
from typing import Any

from transformers import Trainer, TrainerCallback

_closers: weakref.WeakSet[Any] = weakref.WeakSet()  # objects with a `_close()` that ends their sessions
_lock = threading.Lock()


def track(owner: Any) -> None:
    """Close `owner` (its `_close()`) when training ends or the process exits."""
    with _lock:
        _closers.add(owner)


def close_all() -> int:
    """Close the sessions of every tracked object; returns how many objects were closed."""
    with _lock:
        owners = list(_closers)
    for owner in owners:
        with contextlib.suppress(Exception):  # a server already gone has no session to end
            owner._close()
    return len(owners)


class CloseSessions(TrainerCallback):
    """Ends the integration's sessions on the server when `trainer.train()` returns."""

    def on_train_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        close_all()


def attach(trainer: Trainer) -> None:
    """Add CloseSessions to `trainer` once. A trainer still in its __init__ has no callbacks yet: it is attached
    at a later call."""
    if not hasattr(trainer, "callback_handler"):
        return
    if not any(isinstance(callback, CloseSessions) for callback in trainer.callback_handler.callbacks):
        trainer.add_callback(CloseSessions())


def calling_trainer(depth: int = 12) -> Trainer | None:
    """The Trainer whose method is running further up this thread's stack, if any. TRL makes environment
    instances inside its own methods (the probe in __init__, the pool in _generate_and_score_completions), and
    gives them no reference to itself; this is how the integration finds where to add its callback."""
    frame = inspect.currentframe()
    try:
        for _ in range(depth):
            frame = frame.f_back if frame is not None else None
            if frame is None:
                return None
            candidate = frame.f_locals.get("self")
            if isinstance(candidate, Trainer):
                return candidate
        return None
    finally:
        del frame


def attach_to_caller() -> None:
    trainer = calling_trainer()
    if trainer is not None:
        attach(trainer)


atexit.register(close_all)
