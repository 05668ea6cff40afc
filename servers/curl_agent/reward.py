"""1.0 when the model's one reply contains the task's answer."""


def score(trace: dict) -> float:
    reply = trace["turns"][-1].get("reply") or {}
    return 1.0 if trace["task"]["answer"].lower() in (reply.get("content") or "").lower() else 0.0
