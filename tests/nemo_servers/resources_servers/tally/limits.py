"""The tally's rule for one call, apart from its app (imported by bare name, as NeMo's servers import siblings)."""


def refusal(amount: int, limit: int) -> str | None:
    return f"at most {limit} at a time" if abs(amount) > limit else None
