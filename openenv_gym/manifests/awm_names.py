"""How Agent World Model names a scenario: its files give display names ("GoFundMe") and normalised ones
("gofundme"), and AWM's readers match them by the normalised one, as the importer names its worlds and a reset's
`scenario` option finds them."""

from __future__ import annotations

import re


def scenario_key(name: str) -> str:
    """A scenario's name as AWM normalises it (normalize_scenario_name): lowercase, every run of characters
    other than a-z and 0-9 one underscore, none at either end."""
    return "_".join(part for part in re.split(r"[^a-z0-9]+", name.lower()) if part)
