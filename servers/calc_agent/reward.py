"""The reward of an episode, from its trace: 1.0 when the program's final answer is the task's."""


def score(trace: dict) -> dict:
    answer = (trace.get("result") or {}).get("answer")
    try:
        correct = answer is not None and float(answer) == float(trace["task"]["answer"])
    except ValueError:
        correct = False
    tool_calls = sum(len(turn.get("reply", {}).get("tool_calls") or ()) for turn in trace["turns"])
    return {"reward": 1.0 if correct else 0.0, "tool_calls": tool_calls}
