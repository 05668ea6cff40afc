"""Agent World Model's tool worlds, imported from AWM's JSONL format and served in process: real FastAPI apps and
SQLAlchemy in the worlds' venv, real SQLite files, verifiers in child processes. The dataset's hub cannot be
reached here, so the worlds are written in tests/awm_worlds to AWM's code rules."""

import asyncio
import json
import os
import re
import subprocess
import time
from pathlib import Path

import gymnasium as gym
import httpx
import pytest
from awm_worlds import AWM_REWARDS, STYLES, awm_server_code, awm_verdict, scratch_dataset, world_files, write_dataset
from conftest import ROOT, run
from openai_server import ScriptedServer
from tool_shape import names_of
from verifiers_front import FRONT_END, rewards_of, verifiers_runs

import openenv_gym
from benchmarks.ors_compare import free_port
from openenv_gym.client.local import LocalServer
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests import load_manifest
from openenv_gym.manifests.venvs import ensure_venv
from openenv_gym.registry import register_all
from openenv_gym.rollout.turns import Reply, ToolCall

pytestmark = pytest.mark.env_venvs.with_args(scratch_dataset)  # (a lone function would be decorated)


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    return write_dataset(tmp_path_factory.mktemp("awm") / "data")


@pytest.fixture(scope="module")
def imported(dataset, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("servers")
    [result] = import_environment(dataset, "shop", out)
    assert result.gym_id == "openenv/awm-shop"
    register_all()
    return result.folder


def start(folder: Path, scratch: Path, *arguments: str, **environment: str) -> LocalServer:
    """A server of `folder` (with `serve`'s arguments) whose episode files go to `scratch` (where tests can count
    them)."""
    settings = {"TMPDIR": str(scratch), **environment}
    saved = {key: os.environ.get(key) for key in settings}
    os.environ.update(settings)
    try:
        server = LocalServer(str(folder), 1, 1000, *arguments)
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key)
            else:
                os.environ[key] = value
    server.scratch = scratch
    return server


@pytest.fixture(scope="module")
def shop_url(imported, tmp_path_factory):
    server = start(imported, tmp_path_factory.mktemp("tmp"), *FRONT_END)
    yield server
    server.stop()


def episode_folders(server) -> list[Path]:
    return [p for worker in server.scratch.glob("openenv-gym-awm-*") for p in worker.iterdir() if p.is_dir()]


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def test_an_episode_changes_its_own_database_and_the_verifier_scores_it(shop_url):
    env = gym.make("openenv/awm-shop", base_url=shop_url.url)
    obs, info = env.reset(options={"scenario": "bookstore_1", "task_idx": 0})
    assert obs == "Order 2 copies of the book 'Dune'." and info["scenario"] == "bookstore_1"
    assert names_of(info["tools"]) == ["search_books", "get_book", "list_my_orders", "place_order",
                                                 "cancel_order", "submit"]
    order = next(t for t in info["tools"] if t["name"] == "place_order")
    assert order["parameters"]["required"] == ["book_id", "quantity"]  # the body's fields, as fastapi-mcp has them
    books = json.loads(env.step(call("search_books", author="Frank Herbert"))[0])
    assert [b["title"] for b in books] == ["Dune"] and books[0]["stock"] == 5
    obs, reward, terminated, truncated, info = env.step(call("place_order", book_id=1, quantity=2))
    assert json.loads(obs)["status"] == "pending" and (reward, terminated) == (0.0, False)
    assert json.loads(env.step(call("get_book", book_id=1))[0])["stock"] == 3
    obs, reward, terminated, truncated, info = env.step(call("submit", final_answer="ordered"))
    assert (obs, reward, terminated, info["complete"]) == ("complete", 1.0, True, True)

    env.reset(options={"scenario": "bookstore_1", "task_idx": 0})  # a fresh copy of the template
    assert json.loads(env.step(call("get_book", book_id=1))[0])["stock"] == 5
    obs, reward, terminated, truncated, info = env.step(call("submit", final_answer="done"))
    assert (obs, reward, terminated) == ("incomplete", 0.1, True)
    env.close()


def test_rollouts_give_the_policy_each_worlds_own_tools(shop_url):
    """The world's tools come in each reset's info (its description lists none): `rollouts()` passes them to the
    policy as OpenAI function tools, which a model server takes as they are."""
    offered = []

    async def policy(messages, tools):
        offered.append(tools)
        return Reply(tool_calls=[ToolCall("submit", {"final_answer": "nothing"})])

    async def play():
        tasks = [{"scenario": "bookstore_1", "task_idx": 0}] * 2
        return [e async for e in openenv_gym.rollouts("openenv/awm-shop", policy, num_envs=2, tasks=tasks,
                                                      base_url=shop_url.url)]

    episodes = run(play())
    assert [e.rewards for e in episodes] == [[0.1], [0.1]] and len(offered) == 2
    for tools in offered:
        assert [t["type"] for t in tools] == ["function"] * 6
        assert [t["function"]["name"] for t in tools][-2:] == ["cancel_order", "submit"]
        place = next(t["function"] for t in tools if t["function"]["name"] == "place_order")
        assert place["parameters"]["required"] == ["book_id", "quantity"]


def test_query_tasks_model_text_and_errors(shop_url):
    env = gym.make("openenv/awm-shop", base_url=shop_url.url)
    env.reset(options={"scenario": "bookstore_1", "task_idx": 1})
    books = json.loads(env.step('<tool_call>{"name": "search_books", "arguments": '
                                '{"author": "Ursula K. Le Guin"}}</tool_call>')[0])
    assert len(books) == 2
    obs, reward, terminated, truncated, info = env.step(call("place_order", book_id=1, quantity="many"))
    assert obs.startswith("Error: HTTP 422") and info["is_error"] and not terminated  # an HTTP error, as text
    obs, reward, terminated, truncated, info = env.step("I think I am done")  # no tool call: a format error
    assert reward == -1.0 and info["error"]["code"] == "invalid_action" and not terminated
    obs, reward, terminated, truncated, info = env.step("submit(final_answer='There are 2 of them.')")
    assert (reward, terminated) == (1.0, True)
    env.close()


def test_a_call_that_crashes_its_handler_or_lacks_an_argument_costs_an_error_not_the_episode(shop_url):
    env = gym.make("openenv/awm-shop", base_url=shop_url.url)
    env.reset(options={"scenario": "bookstore_1", "task_idx": 0})
    # place_order flushes the order, then reads a book that is not there: AttributeError inside the app
    obs, reward, terminated, truncated, info = env.step(call("place_order", book_id=99, quantity=1))
    assert (obs, reward, terminated, info["is_error"]) == ("Error: HTTP 500: Internal Server Error", 0.0, False, True)
    obs, reward, terminated, truncated, info = env.step(call("get_book"))  # book_id is in the path
    assert obs.startswith("Error: HTTP 422: ") and info["is_error"] and not terminated
    assert json.loads(obs.removeprefix("Error: HTTP 422: "))["detail"] == [
        {"type": "missing", "loc": ["path", "book_id"], "msg": "Field required", "input": None}]
    obs, reward, terminated, truncated, info = env.step(call("get_book", book_id="1\n"))  # no URL can hold it
    assert obs.startswith("Error: the call could not be made: Invalid non-printable") and info["is_error"]
    # the crashed call's write was rolled back: its lock does not hold the episode's next write
    obs, reward, terminated, truncated, info = env.step(call("place_order", book_id=1, quantity=2))
    assert not info["is_error"] and json.loads(obs)["status"] == "pending", obs
    assert [o["book_id"] for o in json.loads(env.step(call("list_my_orders"))[0])] == [2, 1]
    obs, reward, terminated, truncated, info = env.step(call("submit", final_answer="ordered"))
    assert (obs, reward, terminated) == ("complete", 1.0, True)
    env.close()


def test_sessions_are_isolated_and_their_files_removed(shop_url):
    async def main():
        async with openenv_gym.connect(shop_url.url) as conn:
            a, b = conn.session(), conn.session()
            await asyncio.gather(a.reset(options={"scenario": "todo_list_2", "task_idx": 0}),
                                 b.reset(options={"scenario": "todo_list_2", "task_idx": 0}))
            assert len(episode_folders(shop_url)) == 2
            done = await a.step(call("complete_task", task_id=1))
            assert json.loads(done[0])["done"] is True
            theirs = json.loads((await b.step(call("list_tasks", project_id=1, include_done=False)))[0])
            assert [t["title"] for t in theirs] == ["Buy milk", "Fix the sink"]  # b's database is its own
            assert (await a.step(call("submit", final_answer="ok")))[1] == 1.0
            assert (await b.step(call("submit", final_answer="ok")))[1] == 0.1
            await a.close()
            await b.close()
            deadline = time.monotonic() + 10
            while episode_folders(shop_url) and time.monotonic() < deadline:
                await asyncio.sleep(0.05)
            assert episode_folders(shop_url) == []
    asyncio.run(main())


def test_the_catalog_spans_every_scenario_and_make_vec_mixes_them(shop_url):
    envs = gym.make_vec("openenv/awm-shop", num_envs=6, base_url=shop_url.url)
    obs, infos = envs.reset(seed=0, options={"split": "train"})
    envs.close()
    catalog = [(s, t) for s in ("bookstore_1", "todo_list_2") for t in range(3)]
    env = gym.make("openenv/awm-shop", base_url=shop_url.url)
    for index, (scenario, task_idx) in enumerate(catalog):
        obs, info = env.reset(options={"split": "train", "index": index})
        assert (info["scenario"], info["task_idx"]) == (scenario, task_idx)
        # the one vocabulary: a task by its index or its id (scenario/task_idx); AWM's own words too
        for options in ({"task": index}, {"task": f"{scenario}/{task_idx}"},
                        {"scenario": scenario, "task_idx": task_idx}):
            assert env.reset(options=options)[0] == obs, options
    seeded = {env.reset(seed=seed, options={"scenario": "todo_list_2"})[1]["task_idx"] for seed in range(8)}
    assert len(seeded) > 1 and seeded <= {0, 1, 2}  # without task_idx, a seed chooses among the scenario's tasks
    for options, message in (({"scenario": "bookstore_1", "index": 1}, "give one of them"),
                             ({"task_idx": 1}, "give the scenario too"),
                             ({"scenario": "bookstore_1", "level": 2}, "does not understand the reset option "
                              "'level'; it understands: env_seconds, episode_id, expose_answer, expose_task, group, "
                              "index, "
                              "max_steps, parity, rewards, scenario, split, system_prompt, task, task_idx, "
                              "verifier_mode")):
        with pytest.raises(openenv_gym.BadRequestError, match=message):
            env.reset(options=options)
    with pytest.raises(openenv_gym.BadRequestError, match="no task 3 with a verifier"):
        env.reset(options={"scenario": "bookstore_1", "task_idx": 3})
    with pytest.raises(openenv_gym.BadRequestError, match="unknown scenario"):
        env.reset(options={"scenario": "casino_9"})
    with pytest.raises(openenv_gym.BadRequestError, match="unknown scenario"):
        env.reset(options={"scenario": ["bookstore_1"]})
    with pytest.raises(openenv_gym.BadRequestError, match="system_prompt must be a string"):
        env.reset(options={"scenario": "bookstore_1", "parity": True, "system_prompt": 3})
    env.close()
    assert len(set(obs)) > 1  # six seeded picks over both scenarios


def test_import_reports_what_it_skips_and_runs_nothing(tmp_path):
    data = write_dataset(tmp_path / "data")
    with (data / "gen_tasks.jsonl").open("a") as rows:
        rows.write("{not json\n")
        rows.write(json.dumps({"scenario": 7, "tasks": []}) + "\n")
        rows.write(json.dumps({"scenario": "Bookstore 1", "tasks": ["Buy everything."]}) + "\n")  # bookstore_1 again
    envs = [json.loads(line) for line in (data / "gen_envs.jsonl").read_text().splitlines()]
    envs[1]["full_code"] = "raise SystemExit('imports must not run app code')\n" + envs[1]["full_code"]
    envs.append({"scenario": "broken_3", "db_path": "x.db", "full_code": "def nope(:\n"})
    (data / "gen_envs.jsonl").write_text("".join(json.dumps(row) + "\n" for row in envs))
    for part in ("gen_tasks", "gen_db", "gen_sample"):  # broken_3 has every part; only its code does not parse
        rows = [json.loads(line) for line in (data / f"{part}.jsonl").read_text().splitlines()
                if line.startswith("{\"")]
        with (data / f"{part}.jsonl").open("a") as extra:
            extra.write(json.dumps(rows[1] | {"scenario": "broken_3"}) + "\n")
    [result] = import_environment(data, "shop", tmp_path / "out")
    notes = "\n".join(result.notes)
    assert "gen_tasks.jsonl, line 3: not JSON" in notes
    assert "gen_tasks.jsonl, line 4: field 'scenario' missing or not a str" in notes
    assert ("gen_tasks.jsonl, line 5: scenario 'Bookstore 1' (bookstore_1) has its tasks at gen_tasks.jsonl, line 1 "
            "already; skipped") in notes  # the first row is kept, as AWM's readers keep it
    assert "gen_envs.jsonl, scenario broken_3: its code does not parse (line 1" in notes
    assert "scenario bookstore_1, task 3: no verifier; skipped" in notes
    assert "2 scenarios, 6 tasks" in notes
    index = json.loads((result.folder / "worlds" / "index.json").read_text())
    assert [w["name"] for w in index] == ["bookstore_1", "todo_list_2"]
    import sqlite3
    with sqlite3.connect(result.folder / "worlds" / "todo_list_2" / "template.db") as db:
        assert db.execute("SELECT COUNT(*) FROM tasks").fetchone()[0] == 4  # built from the DDL and INSERTs
    [only] = import_environment(data, "one", tmp_path / "out", scenarios=["todo_list_2"])
    assert "1 scenarios, 3 tasks" in only.notes[0]
    with pytest.raises(ImportFailedError, match="--scenario casino_9: not in"):
        import_environment(data, "none", tmp_path / "out", scenarios=["casino_9"])
    with pytest.raises(ImportFailedError, match=r"--data copies data files with a source's code; .* of kind awm"):
        import_environment(data, "data", tmp_path / "out", data=[data / "gen_tasks.jsonl"])
    with pytest.raises(ImportFailedError, match=r"--scenario picks scenarios of an AWM dataset .* of kind ors"):
        import_environment(ROOT / "tests" / "ors_envs" / "answer", "ors", tmp_path / "out", scenarios=["x"])
    with pytest.raises(ImportFailedError, match=r"--env-args are a Verifiers environment's arguments.* of kind awm"):
        import_environment(data, "args", tmp_path / "out", env_args={"max_turns": 3})


HOSTILE = {
    0: "def verify_task_completion(initial_db_path, final_db_path, final_answer):\n    while True:\n        pass\n",
    1: "def verify_task_completion(initial_db_path, final_db_path, final_answer):\n    raise ValueError('boom')\n",
    2: ("def verify_task_completion(initial_db_path, final_db_path, final_answer):\n"
        "    import sqlite3\n"
        "    sqlite3.connect(final_db_path).execute(\"UPDATE tasks SET done = 1\")\n"
        "    return {'result': 'complete'}\n"),
    3: ("def verify_task_completion(initial_db_path, final_db_path, final_answer):\n"
        "    import subprocess\n"
        "    subprocess.run(['true'])\n"
        "    return {'result': 'complete'}\n"),
}


def test_verifiers_that_hang_crash_or_misbehave_end_their_episode_only(tmp_path):
    data = write_dataset(tmp_path / "data", ("todo_list_2",))
    world = json.loads((data / "gen_tasks.jsonl").read_text())
    world["tasks"].append("Do nothing.")
    (data / "gen_tasks.jsonl").write_text(json.dumps(world) + "\n")
    (data / "gen_verifier.pure_code.jsonl").write_text("".join(json.dumps(
        {"scenario": "todo_list_2", "task_idx": i, "task": "", "verification": {"code": code, "raw_response": ""}})
        + "\n" for i, code in HOSTILE.items()))
    [result] = import_environment(data, "hostile", tmp_path / "out")
    manifest = result.folder / "openenv.toml"
    manifest.write_text(manifest.read_text() + "verifier_timeout = 2.0\n")
    server = LocalServer(str(result.folder), 1, 100)
    try:
        async def main():
            async with openenv_gym.connect(server.url) as conn:
                outcomes = {}
                for task_idx in HOSTILE:
                    session = conn.session()
                    await session.reset(options={"scenario": "todo_list_2", "task_idx": task_idx})
                    outcomes[task_idx] = await session.step(call("submit", final_answer="x"))
                    await session.close()
                alive = conn.session()  # the worker is fine
                obs, info = await alive.reset(options={"scenario": "todo_list_2", "task_idx": 1})
                assert obs.startswith("How many open tasks")
                await alive.close()
                return outcomes
        outcomes = asyncio.run(main())
    finally:
        server.stop()
    for task_idx, outcome in outcomes.items():
        assert outcome[:3] == ("incomplete", 0.1, True), task_idx
    assert outcomes[0][4]["error"]["code"] == "verifier_timeout"
    assert outcomes[1][4]["error"]["code"] == "verifier_error" and "boom" in outcomes[1][4]["error"]["message"]
    assert "readonly" in outcomes[2][4]["error"]["message"]  # the databases are read-only to a verifier
    assert "may not subprocess.Popen" in outcomes[3][4]["error"]["message"]


def test_awms_own_protocol_in_parity_mode(shop_url):
    env = gym.make("openenv/awm-shop", base_url=shop_url.url)
    obs, info = env.reset(options={"scenario": "todo_list_2", "task_idx": 1, "parity": True})
    assert "tools" not in info and [m["role"] for m in info["messages"]] == ["system", "user"]
    assert "list_tools" in info["messages"][0]["content"] and info["messages"][1]["content"] == obs
    listing = env.step('<tool_call>\n{"name": "list_tools", "arguments": null}\n</tool_call>')[0]
    assert "1. mcp_tool_list_projects" in listing and "project_id (integer, required)" in listing
    obs, reward, *_ = env.step('<tool_call>{"name": "call_tool", "arguments": {"tool_name": "mcp_tool_list_tasks", '
                               '"arguments": "{\\"project_id\\": 1, \\"include_done\\": false}"}}</tool_call>')
    assert [t["title"] for t in json.loads(obs)] == ["Buy milk", "Fix the sink"] and reward == 0.0
    obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "search", "arguments": {}}</tool_call>')
    assert obs == "Error: Unknown tool 'search'. Only 'list_tools' and 'call_tool' are available."
    assert (reward, terminated) == (-1.0, False)
    assert env.step({"name": "list_tools", "arguments": None})[0] == listing  # a call given as an object
    obs, reward, terminated, truncated, info = env.step("You have 2 open tasks in Home.")  # no call: the answer
    assert (obs, reward, terminated) == ("complete", 1.0, True)
    custom = env.reset(options={"scenario": "todo_list_2", "task_idx": 1, "parity": True, "system_prompt": "Hi."})
    assert custom[1]["messages"][0]["content"] == "Hi."
    env.close()


def test_rewards_can_be_set_per_reset(shop_url):
    env = gym.make("openenv/awm-shop", base_url=shop_url.url)
    env.reset(options={"scenario": "todo_list_2", "task_idx": 2, "rewards": {"incomplete": 0.0, "format_error": -0.5}})
    assert env.step("no call")[1] == -0.5
    assert env.step(call("submit", final_answer="x"))[1:3] == (0.0, True)
    with pytest.raises(openenv_gym.BadRequestError, match="option rewards"):
        env.reset(options={"scenario": "todo_list_2", "rewards": {"complete": "lots"}})
    with pytest.raises(openenv_gym.BadRequestError, match="OPENENV_GYM_JUDGE_URL"):  # SQL mode needs a judge
        env.reset(options={"scenario": "todo_list_2", "task_idx": 0, "verifier_mode": "sql"})
    env.close()


def test_sql_mode_asks_the_judge_and_orphaned_files_are_removed(imported, tmp_path):
    from openai_server import ScriptedServer

    dead = _dead_pid()
    orphan = tmp_path / f"openenv-gym-awm-{dead}-x1" / "ep"
    orphan.mkdir(parents=True)
    (orphan / "db.sqlite").write_bytes(b"left by a worker that was killed")
    with ScriptedServer() as judge:
        server = start(imported, tmp_path, OPENENV_GYM_JUDGE_URL=judge.url, OPENENV_GYM_JUDGE_MODEL="judge")
        try:
            assert not orphan.exists()
            env = gym.make("openenv/awm-shop", base_url=server.url)
            obs, info = env.reset(options={"scenario": "todo_list_2", "task_idx": 0, "verifier_mode": "sql"})
            assert info["verifier_mode"] == "sql"
            env.step(call("complete_task", task_id=1))
            assert env.step(call("submit", final_answer="done"))[1:3] == (1.0, True)
            sent = judge.bodies[-1]["messages"][-1]["content"]
            assert '"task_done": true' in sent and "complete_task" in sent  # the facts and the trajectory
            env.reset(options={"scenario": "todo_list_2", "task_idx": 0, "verifier_mode": "sql"})
            assert env.step(call("submit", final_answer="done"))[1:3] == (0.1, True)
            env.close()
        finally:
            server.stop()


def _dead_pid() -> int:
    child = subprocess.Popen(["true"])
    child.wait()
    return child.pid


def test_worlds_dropped_from_the_cache_keep_serving_their_episodes(dataset, tmp_path):
    [result] = import_environment(dataset, "tight", tmp_path / "out")
    manifest = result.folder / "openenv.toml"
    manifest.write_text(manifest.read_text() + "max_loaded = 1\n")  # one world loaded per worker at a time
    server = start(result.folder, tmp_path)
    try:
        async def main():
            async with openenv_gym.connect(server.url) as conn:
                shop, todo = conn.session(), conn.session()
                await shop.reset(options={"scenario": "bookstore_1", "task_idx": 0})
                await todo.reset(options={"scenario": "todo_list_2", "task_idx": 0})  # bookstore_1 is dropped
                books = json.loads((await shop.step(call("search_books")))[0])
                assert len(books) == 5  # its episode still has its world
                await shop.reset(options={"scenario": "bookstore_1", "task_idx": 1})  # loaded again
                assert len(json.loads((await shop.step(call("search_books")))[0])) == 5
                assert json.loads((await todo.step(call("list_projects")))[0])[0]["name"] == "Home"
                listed = await conn.tasks("train", 0, 10)
                assert [(t["scenario"], t["task_idx"]) for t in listed] == [
                    (s, i) for s in ("bookstore_1", "todo_list_2") for i in range(3)]
                assert {s["name"]: s["num_tasks"] for s in await conn.splits()} == {"train": 6}
                await shop.close()
                await todo.close()
        asyncio.run(main())
    finally:
        server.stop()


# The same calls, as tools of ours and as the HTTP requests AWM's fastapi-mcp (0.4.0) makes of them: path
# parameters put in the path (one not given leaves its "{name}" there), query ones in the query, the rest the body.
STYLE_CALLS = [
    (call("search_books", author="Jane Austen"), ("GET", "/books", {"author": "Jane Austen"}, None)),
    (call("borrow_book", book_id=1), ("POST", "/loans", None, {"book_id": 1})),
    (call("create_review", book_id=2, stars=5, text="Lovely", tags=[{"name": "classic"}]),
     ("POST", "/reviews", None, {"book_id": 2, "stars": 5, "text": "Lovely", "tags": [{"name": "classic"}]})),
    (call("return_book", loan_id=2), ("POST", "/loans/2/return", None, None)),
    (call("return_book", loan_id=99), ("POST", "/loans/99/return", None, None)),  # no such loan: the handler raises
    (call("return_book"), ("POST", "/loans/{loan_id}/return", None, None)),  # the path parameter left out
    (call("create_review", book_id=2, text="x"), ("POST", "/reviews", None, {"book_id": 2, "text": "x"})),  # no stars
]


def _answer(status: int, body: str) -> tuple:
    """What an answer tells the agent, to compare: a success's JSON; a 422's status and the parameters it names
    (FastAPI's own words for them differ: "missing" from us, "int_parsing" of "{loan_id}" from the app); any other
    error's status and text."""
    if status < 400:
        return status, json.loads(body)
    if status == 422:
        return status, sorted(error["loc"] for error in json.loads(body)["detail"])
    return status, body


def _our_answer(obs: str) -> tuple:
    error = re.fullmatch(r"Error: HTTP (\d+): (.*)", obs, re.DOTALL)
    return _answer(int(error[1]), error[2]) if error else _answer(200, obs)


def _served_awms_way(python: Path, code: str, template: Path, scratch: Path, requests: list[tuple]) -> list:
    """The answers to `requests` (method, path, query, body) of a world run as AWM's runner runs it: its code with the
    create_engine line rewritten, a real file run by Python (uvicorn, from its __main__ block) on its own copy of the
    database, scratch/final.db."""
    scratch.mkdir()
    database = scratch / "final.db"
    database.write_bytes(template.read_bytes())
    server = scratch / "server.py"
    server.write_text(awm_server_code(code, database))
    port = free_port()
    process = subprocess.Popen([str(python), str(server)], cwd=scratch, env=os.environ | {"PORT": str(port)},
                               stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as http:
            deadline = time.monotonic() + 60
            while True:
                try:
                    http.get("/openapi.json").raise_for_status()
                    break
                except httpx.HTTPError:
                    assert process.poll() is None and time.monotonic() < deadline, process.stderr.read()[-2000:]
                    time.sleep(0.1)
            # a connection each: uvicorn closes one whose handler raised
            answers = [http.request(method, path, params=query, json=body, headers={"Connection": "close"})
                       for method, path, query, body in requests]
            return [_answer(answer.status_code, answer.text) for answer in answers]
    finally:
        process.terminate()
        process.wait(timeout=10)


def test_worlds_in_every_code_style_load_and_serve_as_awms_runner_serves_them(tmp_path):
    """AWM's generator is free in how its code reads DATABASE_PATH, names request models and orders its classes;
    each style loads, and each tool answers as the same world run AWM's way does: its results, and its errors
    (a handler that raises, a parameter left out, a body field missing) with the same status, and the episode
    goes on."""
    data = write_dataset(tmp_path / "data", tuple(STYLES))
    [result] = import_environment(data, "styles", tmp_path / "out")
    register_all()
    python = ensure_venv(load_manifest(result.folder))
    server = start(result.folder, tmp_path / "tmp")
    try:
        for scenario in STYLES:
            env = gym.make("openenv/awm-styles", base_url=server.url)
            env.reset(options={"scenario": scenario, "task_idx": 1})
            ours = []
            for tool_call, _ in STYLE_CALLS:
                obs, reward, terminated, truncated, info = env.step(tool_call)
                ours.append(_our_answer(obs))
                assert info["is_error"] == (ours[-1][0] >= 400) and not terminated, (scenario, obs)
            obs, reward, terminated, truncated, info = env.step(call("submit", final_answer="reviewed"))
            assert (obs, reward, terminated) == ("complete", 1.0, True), scenario  # the verifier saw the review
            env.close()
            _, app = world_files(scenario)
            theirs = _served_awms_way(python, app.read_text(), result.folder / "worlds" / scenario / "template.db",
                                      tmp_path / f"awm-{scenario}", [request for _, request in STYLE_CALLS])
            assert ours == theirs, scenario
    finally:
        server.stop()


def test_the_verifiers_front_end_ends_each_run_with_the_reward_of_the_world_run_awms_way(shop_url, imported,
                                                                                          tmp_path):
    """Verifiers' EnvClient (as prime-rl drives it) runs bookstore_1's task 0 through our front end, a scripted model
    calling the world's tools; the same calls as the HTTP requests AWM makes of them, to the world run AWM's way, and
    its verifier run as AWM runs it on the two databases: the same reward."""
    plays = {"orders": [call("search_books", author="Frank Herbert"), call("place_order", book_id=1, quantity=2),
                        call("submit", final_answer="ordered")],
             "browses": [call("get_book", book_id=1), call("submit", final_answer="done")]}
    requests = {"orders": [("GET", "/books", {"author": "Frank Herbert"}, None),
                           ("POST", "/orders", None, {"book_id": 1, "quantity": 2})],
                "browses": [("GET", "/books/1", None, None)]}
    with ScriptedServer(plays) as model:
        runs = verifiers_runs(shop_url.status["verifiers"], model.url, [f"script:{name}" for name in plays],
                              [{"scenario": "bookstore_1", "task_idx": 0}] * len(plays))
    python = ensure_venv(load_manifest(imported))
    world, app = world_files("bookstore_1")
    template = imported / "worlds" / "bookstore_1" / "template.db"
    theirs = []
    for name, sent in requests.items():
        answers = _served_awms_way(python, app.read_text(), template, tmp_path / name, sent)
        assert all(status == 200 for status, _ in answers), answers
        initial = tmp_path / name / "initial.db"
        initial.write_bytes(template.read_bytes())
        verdict = awm_verdict((world / "verify_0.py").read_text(), initial, tmp_path / name / "final.db",
                              plays[name][-1]["arguments"]["final_answer"])
        theirs.append(AWM_REWARDS[verdict])
    assert rewards_of(runs) == theirs == [1.0, 0.1]
