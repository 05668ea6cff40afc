"""Reset options: one vocabulary in every environment kind, and an option an environment does not understand is
refused with the list of those it does, never ignored (a dropped option plays another task, unseen).

- The server's own, which every environment takes: `max_steps`, `episode_id`, `group`, `env_seconds`.
- Choosing the task, in every kind with a catalog (episode/tasks.py): `task` (an index, an id or a name), or
  `split` and `index`; without them, a choice seeded by reset's own `seed` argument. A seed is never an option.
- Showing in info what the policy must not see: `expose_task`, `expose_answer`.

An environment declares what it reads in its description (`describe()["reset_options"]`, which the server
checks every reset against); one that declares nothing (written against openenv_gym and reading its options
itself, or an OpenEnv environment whose reset takes **kwargs) gets them all, but a seed.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from openenv_gym.episode.groups import GROUP_OPTION
from openenv_gym.episode.state import ENV_SECONDS, EPISODE_ID_OPTION, MAX_STEPS_OPTION
from openenv_gym.episode.tasks import REVEAL_OPTIONS, TASK_OPTIONS
from openenv_gym.errors import BadRequestError

SERVER_OPTIONS = frozenset({MAX_STEPS_OPTION, EPISODE_ID_OPTION, GROUP_OPTION, ENV_SECONDS})
CATALOG_OPTIONS = frozenset(TASK_OPTIONS) | frozenset(REVEAL_OPTIONS)  # a kind with a task catalog reads these
SEED = "seed"
DESCRIBED_AS = "reset_options"  # the key of an environment's description that lists them


def vocabulary(*own: Iterable[str]) -> list[str]:
    """What an environment's description lists: its own options and the server's, sorted."""
    return sorted(SERVER_OPTIONS.union(*own))


def understood(description: dict[str, Any]) -> frozenset[str] | None:
    """The options an environment's description says it understands (None: it reads them itself, all of them)."""
    listed = description.get(DESCRIBED_AS)
    return None if listed is None else SERVER_OPTIONS.union(listed)


def check_options(options: dict[str, Any] | None, known: frozenset[str] | None, subject: str) -> None:
    """BadRequestError, naming what `subject` understands, when `options` hold a key outside `known` (None: any
    key but a seed, which is never an option)."""
    if not options:
        return
    if SEED in options:
        raise BadRequestError(f"the seed is reset's own argument, not an option: call reset(seed={options[SEED]!r:.40}"
                              f"{', options=...' if len(options) > 1 else ''}) (on the wire, the reset's 'seed')")
    if known is None:
        return
    unknown = options.keys() - known
    if unknown:
        names = ", ".join(repr(name)[:80] for name in sorted(unknown, key=str)[:10])
        raise BadRequestError(f"{subject} does not understand the reset option{'s' if len(unknown) > 1 else ''} "
                              f"{names}; it understands: {', '.join(sorted(known))}")
