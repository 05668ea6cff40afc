"""A NeMo Gym resource server's stored rollouts (data/example_rollouts.jsonl) replayed turn by turn through our
sessions, the model's reasoning included, each to the reward NeMo Gym stored with it. Where the two differ, NeMo
Gym's own server process (nemo_peer.NemoOwnServer) plays the same episode again, to say whose the difference is:
its own reward agrees with ours (the stored one came from another version or config of the server, or another of
its processes: grl_tetris draws pieces from hash(str(seed)), so both sides hash alike here), its answers differ from
run to run, or ours is the one that differs.

    actions = replayed_actions(rollout["response"]["output"])   # each model turn as a step's action
    played = plan(folder, source, split)       # before the server starts: it may add a split of rollouts' rows
    verdicts = replay(url, folder, played)     # one per stored rollout
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from pathlib import Path
from typing import Any

import tomli_w

from benchmarks.nemo_peer import NemoSide, or_none

INPUT = "responses_create_params"
ROLLOUTS = Path("data") / "example_rollouts.jsonl"
REPLAYED_SPLIT = "replayed"  # the rows of stored rollouts that play no example row, added to the env by the replay
REBUILT = "_replay_row_rebuilt"  # marks a rollout whose row was rebuilt from its own fields
CLOSE = 1e-6  # rewards this close are the same
RUN_TO_RUN = "theirs: NeMo's own process gives this episode different rewards"
PROCESSES = "theirs: the server's results differ between NeMo's own processes"
UNPLAYABLE = "theirs: NeMo's own process cannot play the stored rollout either"


def rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def replayed_actions(output: list[dict]) -> list[dict]:
    """The policy's replies in a stored rollout's output: each run of its model items (reasoning, text, function
    calls) up to the tool outputs or user messages that answer them."""
    actions: list[dict] = []
    current: dict | None = None
    for item in output:
        kind = item.get("type", "message")
        if kind in ("function_call", "reasoning") or (kind == "message" and item.get("role") == "assistant"):
            if current is None:
                current = {"content": None, "tool_calls": []}
                actions.append(current)
            if kind == "reasoning":
                text = "".join(part.get("text", "") for part in item.get("summary") or [])
                current["reasoning_content"] = (current.get("reasoning_content") or "") + text
            elif kind == "function_call":
                current["tool_calls"].append({"id": item["call_id"], "type": "function",
                                              "function": {"name": item["name"], "arguments": item["arguments"]}})
            else:
                current["content"] = (current["content"] or "") + _text(item["content"])
        elif kind in ("function_call_output", "message"):
            current = None  # answered: the next model item is the next reply
    return actions


def stored_outputs(output: list[dict]) -> list[str]:
    return [item["output"] for item in output if item.get("type") == "function_call_output"]


def same_outputs(ours: list[str], stored: list[str]) -> bool:
    """Whether the tools answered as they did for NeMo Gym (JSON compared as values: its spacing aside)."""
    return list(map(_value, ours)) == list(map(_value, stored))


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(part.get("text", "") for part in content or [] if isinstance(part, dict))


def _texts(items: Any) -> list:
    if isinstance(items, str):
        return [items]
    return [(item.get("role"), _text(item.get("content"))) for item in items]


def task_of(dataset: list[dict], rollout: dict) -> int | None:
    """The index of the dataset row a stored rollout played, if one did: the row its `_ng_task_index` names (as
    `gym eval reverify` joins them) whose input begins the rollout's (a Gymnasium agent adds the reset's observation
    to it), else the row with the same input, else one whose input begins it."""
    given = _texts(rollout[INPUT].get("input"))
    inputs = [_texts(row[INPUT].get("input")) for row in dataset]
    named = rollout.get("_ng_task_index")
    if isinstance(named, int) and 0 <= named < len(inputs) and inputs[named] == given[:len(inputs[named])]:
        return named
    return next((index for index, row in enumerate(inputs) if row == given), None) if given in inputs else \
        next((index for index, row in enumerate(inputs) if row and row == given[:len(row)]), None)


def rollout_row(rollout: dict, row_keys: set[str]) -> dict:
    """The row a stored rollout played, where it is no example row: its request, and its fields that rows have (the
    rest are what /verify answered)."""
    return {key: value for key, value in rollout.items() if key == INPUT or key in row_keys}


def add_split(folder: Path, name: str, added: list[dict]) -> None:
    """Give an imported env a split of these rows (its manifest rewritten)."""
    import tomllib

    (folder / "data" / f"{name}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in added))
    manifest = tomllib.loads((folder / "openenv.toml").read_text())
    manifest["splits"][name] = f"data/{name}.jsonl"
    (folder / "openenv.toml").write_text(tomli_w.dumps(manifest))


def plan(folder: Path, source: Path, split: str) -> list[tuple[dict, dict, dict]]:
    """(the rollout, its row, the reset options that play it) of each stored rollout; the rows of those that play
    no row of `split` become a split of the env's own."""
    dataset = rows(folder / "data" / f"{split}.jsonl")
    keys = {key for row in dataset for key in row}
    played, extra = [], []
    for rollout in rows(source / ROLLOUTS):
        index = task_of(dataset, rollout)
        if index is not None:
            played.append((rollout, dataset[index], {"split": split, "index": index}))
        else:  # (its row rebuilt: the verdict says so where the reward differs)
            extra.append(rollout_row(rollout, keys))
            played.append((rollout | {REBUILT: True}, extra[-1], {"split": REPLAYED_SPLIT, "index": len(extra) - 1}))
    if extra:
        add_split(folder, REPLAYED_SPLIT, extra)
    return played


async def play(url: str, actions: list[dict], options: dict, timeout: float) -> dict[str, Any]:
    """One episode: reset, each action until it ends. Its return, and the Responses object it was verified with."""
    import openenv_gym

    async with openenv_gym.connect(url) as conn:
        session = conn.session()
        try:
            await asyncio.wait_for(session.reset(options=options), timeout)
            total, ended, info = 0.0, False, {}
            for action in actions:
                _, reward, terminated, truncated, info = await asyncio.wait_for(session.step(action), timeout)
                total += reward
                ended = terminated or truncated
                if ended:
                    break
            return {"reward": total, "ended": ended, "response": info.get("response"),
                    "outputs": stored_outputs((info.get("response") or {}).get("output") or [])}
        finally:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(session.close(), 30)


def replayable(result: dict[str, Any]) -> bool:
    """Whether a stored rollout could be replayed: by us, or at least by NeMo's own process."""
    return not result["verdict"].startswith(UNPLAYABLE)


def verdict(ours: dict, stored: float, own: tuple[float | None, ...] | None) -> str:
    """Whose a replay's reward is: "same", or why it differs (`own`: NeMo's own process's rewards for the same
    episode, played OWN_RUNS times)."""
    if ours["ended"] and abs(ours["reward"] - stored) <= CLOSE:
        return "same"
    runs = [reward for reward in own or () if reward is not None]
    if len(runs) > 1 and max(runs) - min(runs) > CLOSE:
        return f"{RUN_TO_RUN} from run to run"
    if not ours["ended"]:
        return "ours: the stored turns did not end the episode here"
    if not runs:
        return "ours: differs from the stored reward (NeMo's own process could not replay it)"
    if abs(runs[0] - ours["reward"]) <= CLOSE:
        return "theirs: NeMo's own process gives our reward; the stored one came from another version or config"
    return "ours: NeMo's own process gives another reward"


def replay(url: str, folder: Path, played: list[tuple[dict, dict, dict]], timeout: float = 180.0) \
        -> list[dict[str, Any]]:
    """Each stored rollout `plan` gave (of the server imported in `folder`, served at `url`), replayed: its stored
    reward, ours, and whose any difference is."""
    from openenv_gym.manifests import load_manifest

    nemo = NemoSide(load_manifest(folder))
    try:
        results = [replay_one(url, nemo, number, rollout, row, options, timeout)
                   for number, (rollout, row, options) in enumerate(played)]
    finally:
        nemo.close()
    varying = next((result["rollout"] for result in results if result["verdict"].startswith(PROCESSES)), None)
    for result in results:  # (a server whose results depend on the process: no difference of it can be told ours)
        if varying is not None and result["verdict"].startswith("ours:") and "error" not in result:
            result["verdict"] = (f"{PROCESSES} (rollout {varying}), so this difference cannot be told "
                                 f"({result['verdict']})")
    return results


def replay_one(url: str, nemo: NemoSide, number: int, rollout: dict, row: dict, options: dict, timeout: float) \
        -> dict[str, Any]:
    actions, stored = replayed_actions(rollout["response"]["output"]), float(rollout.get("reward") or 0.0)
    try:
        ours = asyncio.run(play(url, actions, options, timeout))
    except Exception as exc:  # the episode's error is the finding, unless NeMo's own process fails it too
        theirs = or_none(lambda: nemo.runs(row, actions, rollout["response"])[0])
        return {"rollout": number, "stored": stored, "own_stored": theirs, "error": f"{type(exc).__name__}: "
                f"{exc}"[:1000], "verdict": "ours: the replay failed" if theirs is not None else
                UNPLAYABLE}
    checked, own_error = None, None
    if not ours["ended"] or abs(ours["reward"] - stored) > CLOSE:
        response = ours["response"] or rollout["response"]  # (unended: the stored one's calls)
        try:
            checked = nemo.runs(row, actions, response)
            said = verdict(ours, stored, checked)
            if not ours["ended"] and not said.startswith(RUN_TO_RUN):
                reward, ended = nemo.episode(row, actions, response)
                if not ended and abs(reward - ours["reward"]) <= CLOSE:
                    said = ("theirs: NeMo's own process, given the same turns, gives our reward and does not end the "
                            "episode either: the stored rollout holds only part of it")
            if said != "same" and not said.startswith(RUN_TO_RUN) and checked[0] is not None:
                elsewhere = nemo.elsewhere(row, actions, response)
                if any(reward is None or abs(reward - checked[0]) > CLOSE for reward in elsewhere):
                    said = f"{PROCESSES}: {checked[0]} here, {', '.join(map(str, elsewhere))} in others"
        except Exception as exc:  # (NeMo's own process would not start, or not answer)
            own_error, said = f"{type(exc).__name__}: {exc}"[:500], verdict(ours, stored, None)
    else:
        said = "same"
    if rollout.get(REBUILT) and said != "same":
        said = (f"theirs: its row is not among the server's data; rebuilt from the rollout's fields, it may lack what "
                f"the server reads ({said})")
    return {"rollout": number, "stored": stored, "ours": ours["reward"], "own": checked, "verdict": said,
            "own_error": own_error, "same_tool_outputs": same_outputs(ours["outputs"],
                                                                      stored_outputs(rollout["response"]["output"]))}
