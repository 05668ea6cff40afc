"""What AWM's own pipeline writes imports and plays: display names in every file but the verifiers', which hold
normalised ones; code verifiers in gen_verifier.jsonl; sample data of which some statements fail. The fixture is
tests/awm_worlds' write_pipeline_dataset; the names are checked against AWM's normalisation rule."""

import json
import re
import sqlite3

import gymnasium as gym
import pytest
from awm_worlds import PIPELINE_NAMES, scratch_dataset, write_pipeline_dataset

from openenv_gym.client.local import LocalServer
from openenv_gym.importers import ImportFailedError, import_environment
from openenv_gym.manifests.awm_names import scenario_key
from openenv_gym.registry import register_all

pytestmark = pytest.mark.env_venvs.with_args(scratch_dataset)


def awms_normalisation(name: str) -> str:
    """AWM's rule (awm/tools.py, normalize_scenario_name), step by step as it states it: lowercase; each character
    outside a-z, 0-9 and _ becomes _; runs of _ become one; none at either end."""
    lowered = name.lower()
    replaced = "".join(c if c in "abcdefghijklmnopqrstuvwxyz0123456789_" else "_" for c in lowered)
    while "__" in replaced:
        replaced = replaced.replace("__", "_")
    return replaced.strip("_")


@pytest.mark.parametrize("name", ["GoFundMe", "gofundme", "E-Commerce Store 33", "  Book Store (1) ", "TodoList #2",
                                  "__a__b__", "a_-_b", "Café Ünïcode", "İstanbul Bazaar", "ÅngstrÖm 2.0", "x\ty\nz",
                                  "ﬁle ẞ", "e_commerce_33"])
def test_scenario_names_are_normalised_as_awm_normalises_them(name):
    assert scenario_key(name) == awms_normalisation(name)


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def test_a_dataset_of_awms_pipeline_imports_and_a_correct_play_scores_complete(tmp_path):
    data = write_pipeline_dataset(tmp_path / "data")
    [result] = import_environment(data, "pipeline", tmp_path / "out")
    notes = "\n".join(result.notes)
    bookstore, todo = (PIPELINE_NAMES[s][1] for s in ("bookstore_1", "todo_list_2"))
    assert "2 scenarios, 6 tasks" in notes  # bookstore_1's task 3 has no verifier, as in the plain dataset
    assert notes.count("no verifier; skipped") == 1 and f"scenario {bookstore}, task 3: no verifier" in notes
    assert "2 scenarios are named as AWM normalises their names: 'Book Store (1)' -> book_store_1, " \
           "'TodoList #2' -> todolist_2" in notes
    assert "gen_verifier.jsonl: 6 of its verifiers define verify_task_completion: they run in code mode" in notes
    # what failed of the sample data is reported, table by table, and the rest is there
    assert f"gen_db.jsonl, scenario {bookstore}, table wishlist: OperationalError: incomplete input" in notes
    failed = re.search(rf"gen_sample.jsonl, scenario {bookstore}: 3 of (\d+) INSERTs failed and were skipped "
                       r"\(table wishlist: OperationalError: no such table: wishlist; table books: IntegrityError: "
                       r"UNIQUE constraint failed: books.id; table orders: IntegrityError: FOREIGN KEY constraint "
                       r"failed\)", notes)
    assert failed, notes
    world = json.loads(data.joinpath("gen_sample.jsonl").read_text().splitlines()[0])["sample_data"]["tables"]
    assert int(failed[1]) == sum(len(table["insert_statements"]) for table in world)
    with sqlite3.connect(result.folder / "worlds" / bookstore / "template.db") as db:
        assert db.execute("SELECT name FROM sqlite_master WHERE name = 'wishlist'").fetchall() == []
        assert db.execute("SELECT title, stock FROM books WHERE id = 1").fetchall() == [("Dune", 5)]
        assert [row[0] for row in db.execute("SELECT id FROM orders")] == [1, 2]  # order 3's book 42 is not there
        assert db.execute("SELECT COUNT(*) FROM books").fetchone()[0] == 5
    index = json.loads((result.folder / "worlds" / "index.json").read_text())
    assert {w["name"]: [t["verifiers"] for t in w["tasks"]] for w in index} == {
        bookstore: [["code"]] * 3, todo: [["code"]] * 3}
    with pytest.raises(ImportFailedError, match="--scenario Casino: not in"):
        import_environment(data, "none", tmp_path / "out", scenarios=["Casino"])
    [only] = import_environment(data, "one", tmp_path / "out", scenarios=["TodoList #2"])  # a display name
    assert "1 scenarios, 3 tasks" in only.notes[0]

    register_all()
    server = LocalServer(str(result.folder), 1, 100)
    try:
        env = gym.make("openenv/awm-pipeline", base_url=server.url)
        env.reset(options={"scenario": bookstore, "task_idx": 0})
        assert not env.step(call("place_order", book_id=1, quantity=2))[4]["is_error"]
        obs, reward, terminated, truncated, info = env.step(call("submit", final_answer="ordered"))
        assert (obs, reward, terminated, info["complete"]) == ("complete", 1.0, True, True)
        obs, info = env.reset(options={"scenario": "TodoList #2", "task_idx": 1})  # its display name finds it too
        assert info["scenario"] == todo  # its verifier takes its arguments by position
        obs, reward, terminated, truncated, info = env.step(call("submit", final_answer="2 open tasks"))
        assert (obs, reward, terminated) == ("complete", 1.0, True)
        env.reset(options={"scenario": todo, "task_idx": 1})
        assert env.step(call("submit", final_answer="5"))[:3] == ("incomplete", 0.1, True)
        env.close()
    finally:
        server.stop()
