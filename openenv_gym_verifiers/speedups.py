"""What a serving process of the front end does faster than its libraries do by themselves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def memoize_default_factory_check() -> None:
    """pydantic (2.14) asks, at every `model_construct`, whether each field's default factory takes the validated
    data, by `inspect.signature` of the factory (for a builtin such as `list`, parsed from its text signature): a
    tenth of the front end's time goes there, in the nodes of Verifiers' trace graph. The answer is the factory's
    own, so it is kept per factory (pydantic caches it for private attributes only: pydantic#13376)."""
    from pydantic._internal import _fields

    check = _fields.takes_validated_data_argument
    if getattr(check, "memoized", False):
        return
    known: dict[Any, bool] = {}

    def memoized(factory: Callable[..., Any]) -> bool:
        try:
            return known[factory]
        except KeyError:
            answer = known[factory] = check(factory)
            return answer
        except TypeError:  # (an unhashable factory: asked each time, as before)
            return check(factory)

    memoized.memoized = True  # type: ignore[attr-defined]
    _fields.takes_validated_data_argument = memoized
