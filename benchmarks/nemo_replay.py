"""A NeMo Gym resource server's stored rollouts (data/example_rollouts.jsonl) replayed turn by turn through our
sessions, the model's reasoning included, each to the reward NeMo Gym stored with it. Where the two differ, NeMo
Gym's own server process (nemo_peer.NemoOwnServer) plays the same episode again, to say whose the difference is:
its own reward agrees with ours (the stored one came from another version or config of the server), its
answers differ (the server's results differ between runs on NeMo's side), or ours is the one that differs.

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

INPUT = "responses_create_params"
ROLLOUTS = Path("data") / "example_rollouts.jsonl"
REPLAYED_SPLIT = "replayed"  # the rows of stored rollouts that play no example row, added to the env by the replay
CLOSE = 1e-6  # rewards this close are the same
OWN_RUNS = 8  # at most, NeMo's own process plays an episode whose reward differs (does it differ itself?)


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
        else:
            extra.append(rollout_row(rollout, keys))
            played.append((rollout, extra[-1], {"split": REPLAYED_SPLIT, "index": len(extra) - 1}))
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


def own_reward(url: str, protocol: str, row: dict, actions: list[dict], response: dict | None) -> float | None:
    """The reward NeMo Gym's own server process gives the same episode, played as its agents play it (one cookie jar):
    "resources", the episode's tool calls then /verify of the Responses object ours was verified with;
    "gymnasium", /reset then a /step per action."""
    import httpx

    from openenv_gym.episode.assistant import assistant_message
    from openenv_gym.protocol.openai_responses import output_items, response_object, responses_request

    with httpx.Client(base_url=url, timeout=300) as client:
        if protocol == "resources":
            if response is None:
                return None
            client.post("/seed_session", json=row).raise_for_status()
            for item in response["output"]:
                if item.get("type") == "function_call":
                    client.post(f"/{item['name']}", json=json.loads(item["arguments"]))
            answer = client.post("/verify", json=row | {"response": response})
            answer.raise_for_status()
            return answer.json()["reward"]
        request, total = responses_request(row[INPUT]), 0.0
        client.post("/reset", json=row).raise_for_status()
        for turn, action in enumerate(actions, 1):
            message = assistant_message(action, set(), turn)
            if isinstance(message, str):
                return None
            step = response_object(message, "policy", f"resp_{turn}", request) | {
                "output": output_items(message, f"own_{turn}")}
            answer = client.post("/step", json=row | {"response": step}).json()
            total += float(answer.get("reward") or 0.0)
            if answer.get("terminated") or answer.get("truncated"):
                break
        return total


def own_runs(url: str, protocol: str, row: dict, actions: list[dict], response: dict) -> tuple[float | None, ...]:
    """NeMo's own rewards for one episode, played until two differ (its results differ between runs: random deals),
    at most OWN_RUNS times."""
    rewards: list[float | None] = []
    while len(rewards) < OWN_RUNS and len({reward for reward in rewards if reward is not None}) < 2:
        rewards.append(_or_none(own_reward, url, protocol, row, actions, response))
    return tuple(rewards)


def _or_none(function: Any, *args: Any) -> Any:
    try:
        return function(*args)
    except Exception:  # (NeMo's own process refused the episode: it gives no reward for it)
        return None


def verdict(ours: dict, stored: float, own: tuple[float | None, ...] | None) -> str:
    """Whose a replay's reward is: "same", or why it differs (`own`: NeMo's own process's rewards for the same
    episode, played OWN_RUNS times)."""
    if ours["ended"] and abs(ours["reward"] - stored) <= CLOSE:
        return "same"
    runs = [reward for reward in own or () if reward is not None]
    if len(runs) > 1 and max(runs) - min(runs) > CLOSE:
        return "theirs: NeMo's own process gives this episode different rewards from run to run"
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
    from benchmarks.nemo_peer import NemoOwnServer
    from openenv_gym.manifests import load_manifest

    manifest = load_manifest(folder)
    results, own = [], None
    try:
        for number, (rollout, row, options) in enumerate(played):
            actions, stored = replayed_actions(rollout["response"]["output"]), float(rollout.get("reward") or 0.0)
            try:
                ours = asyncio.run(play(url, actions, options, timeout))
            except Exception as exc:  # the episode's error is the finding, unless NeMo's own process fails it too
                try:
                    own = own or NemoOwnServer.of(manifest)
                    theirs = own_reward(own.url, manifest.protocol, row, actions, rollout["response"])
                except Exception:  # (NeMo's own process would not start, or not answer)
                    theirs = None
                results.append({"rollout": number, "stored": stored, "own_stored": theirs,
                                "verdict": "ours: the replay failed" if theirs is not None else
                                "theirs: NeMo's own process cannot verify the stored rollout either",
                                "error": f"{type(exc).__name__}: {exc}"[:1000]})
                continue
            checked = None
            if not ours["ended"] or abs(ours["reward"] - stored) > CLOSE:
                response = ours["response"] or rollout["response"]  # (unended: the stored one's calls)
                try:
                    own = own or NemoOwnServer.of(manifest)
                    checked = own_runs(own.url, manifest.protocol, row, actions, response)
                except Exception as exc:  # (NeMo's own process would not start, or not answer)
                    ours["own_error"] = f"{type(exc).__name__}: {exc}"[:500]
            results.append({"rollout": number, "stored": stored, "ours": ours["reward"], "own": checked,
                            "verdict": verdict(ours, stored, checked), "own_error": ours.get("own_error"),
                            "same_tool_outputs": same_outputs(ours["outputs"],
                                                              stored_outputs(rollout["response"]["output"]))})
    finally:
        if own is not None:
            own.stop()
    return results
