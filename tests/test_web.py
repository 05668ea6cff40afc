"""The playground page (GET /web) and the episode viewer (`openenv-gym view`), in a real browser: Playwright
driving Debian's Chromium (make test installs it; Playwright's own browser download cannot be reached here).

The README's screenshots are taken here: with OPENENV_GYM_SCREENSHOTS=FOLDER (`make screenshots`), the tests
save them into FOLDER."""

import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from conftest import ROOT, health, http_url, run, wait_until
from episode_files import write_episodes, write_group_episodes

CHROMIUM = Path("/usr/bin/chromium")
VF_GUESSING = ROOT / "benchmarks" / "envs" / "vf_guessing"


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"the browser tests need Chromium at {CHROMIUM}: make test installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


def screenshot(page, name: str, tmp_path: Path, full_page: bool = True) -> None:
    """Take the page's picture; keep it for the README when OPENENV_GYM_SCREENSHOTS names a folder."""
    folder = Path(os.environ.get("OPENENV_GYM_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    picture = page.screenshot(path=folder / f"{name}.png", full_page=full_page)
    assert picture.startswith(b"\x89PNG")


def open_page(browser, url: str):
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    page.goto(http_url(url) + "/web")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('connected')")
    return page


def steps(page) -> int:
    return page.locator("#history > li").count()


def reset(page, seed: int) -> None:
    page.fill("#seed", str(seed))
    page.click("#reset")
    page.wait_for_function("document.getElementById('history').children.length === 1")


def call(page, tool: str, **fields: str) -> str:
    """Fill a tool's form and call it; the observation it gets."""
    before = steps(page)
    for name, value in fields.items():
        page.fill(f"form[data-tool={tool}] [name={name}]", value)
    page.click(f"form[data-tool={tool}] button")
    page.wait_for_function(f"document.getElementById('history').children.length === {before + 1}")
    return page.inner_text("#observation")


def test_a_guess_episode_played_to_the_end_through_the_forms(browser, guess_url, tmp_path):
    page = browser.new_page(viewport={"width": 1000, "height": 800})
    requested = []
    page.on("request", lambda request: requested.append(request.url))
    page.goto(http_url(guess_url) + "/web")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('connected')")
    assert requested and all(url.startswith(http_url(guess_url) + "/web") for url in requested)  # nothing else
    assert page.inner_text("#env-name") == "guess"
    assert sorted(page.locator("form.tool").evaluate_all("forms => forms.map(f => f.dataset.tool)")) == [
        "divisible_by", "give_up", "guess"]
    reset(page, 3)
    assert page.inner_text("#observation").startswith("I am thinking of an integer between 1 and 100")
    low, high = 1, 100
    for _ in range(20):
        guess = (low + high) // 2
        obs = call(page, "guess", number=str(guess))
        if "correct" in obs:
            break
        low, high = (guess + 1, high) if "higher" in obs else (low, guess - 1)
    outcome = page.inner_text("#outcome")
    assert "episode over" in outcome and float(outcome.split()[1]) > 0.2  # the final reward, read off the page
    assert steps(page) >= 2 and "terminated true" in page.locator("#history > li").last.inner_text()
    screenshot(page, "playground", tmp_path)
    page.close()
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)  # closing the tab closed its session


def test_a_text_env_through_the_free_text_box(browser, echo_url):
    page = open_page(browser, echo_url)
    reset(page, 0)
    page.fill("#text-action", "hello\nworld")
    page.click("#text-form button")
    page.wait_for_function("document.getElementById('history').children.length === 2")
    assert page.inner_text("#observation") == "hello\nworld"  # line breaks kept
    with page.expect_download() as download:
        page.click("#download")
    episode = download.value.path().read_text()
    assert '"action": "hello\\nworld"' in episode and '"env": "echo"' in episode
    page.close()
    assert wait_until(lambda: health(echo_url)["sessions"] == 0)


def test_two_tabs_are_two_sessions(browser, guess_url):
    first, second = open_page(browser, guess_url), open_page(browser, guess_url)
    reset(first, 1)
    reset(second, 2)
    call(first, "guess", number="50")
    call(first, "guess", number="25")
    call(second, "give_up")
    assert steps(first) == 3 and steps(second) == 2  # each sees its own episode only
    assert "episode over" in second.inner_text("#outcome") and "episode over" not in first.inner_text("#outcome")
    call(first, "guess", number="60")  # the other tab's ended episode is not this one's
    assert health(guess_url)["sessions"] == 2
    first.close()
    second.close()
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


def test_bad_input_in_a_form_shows_an_error_and_the_session_goes_on(browser, guess_url):
    page = open_page(browser, guess_url)
    reset(page, 5)
    obs = call(page, "guess", number="fifty")
    assert "Invalid action" in obs and page.inner_text("#error")  # the env's own answer, shown as an error
    assert "number" in page.inner_text("#error")
    assert "than" in call(page, "guess", number="50")  # the episode goes on
    page.close()
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


@pytest.mark.env_venvs(ROOT / "tests" / "ors_envs" / "answer")
def test_a_task_picked_from_the_catalog(browser, start_server, tmp_path):
    from openenv_gym.importers import import_environment

    [imported] = import_environment(ROOT / "tests" / "ors_envs" / "answer", "answer", tmp_path)
    url = start_server(str(imported.folder))
    page = open_page(browser, url)
    assert page.locator("#split option").all_inner_texts() == ["(a seeded choice)", "train (3 tasks)",
                                                               "test (1 tasks)"]
    page.select_option("#split", "test")
    page.wait_for_function("document.getElementById('task').options.length === 1")
    assert page.inner_text("#task") == "task 0"  # the task spec (it holds the answer) stays hidden
    reset(page, 0)
    assert page.inner_text("#observation") == "What is 10 - 4?"
    assert call(page, "answer", answer="6") == "correct"
    assert "reward 1" in page.inner_text("#outcome")
    page.close()


def test_the_token_prompt(browser, start_server):
    url = start_server("echo", "--token", "s3cret/+=token")  # characters a subprotocol cannot hold as they are
    page = browser.new_page()
    page.goto(http_url(url) + "/web")  # the page itself is open; its WebSocket needs the token
    page.wait_for_selector("#token-form:not([hidden])")
    assert "token" in page.inner_text("#status")
    page.fill("#token", "wrong")
    page.click("#token-form button")
    page.wait_for_function("document.getElementById('status').textContent.includes('refused')")
    page.fill("#token", "s3cret/+=token")
    page.click("#token-form button")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('connected')")
    assert "s3cret" not in page.url
    reset(page, 0)
    page.fill("#text-action", "hi")
    page.click("#text-form button")
    page.wait_for_function("document.getElementById('history').children.length === 2")
    assert page.inner_text("#observation") == "hi"
    page.close()
    assert httpx.get(http_url(url) + "/info", timeout=5).status_code == 401  # other routes still want the header


def test_no_web_turns_the_page_off(start_server):
    url = start_server("echo", "--no-web")
    assert httpx.get(http_url(url) + "/web", timeout=5).status_code == 404
    assert httpx.get(http_url(url) + "/healthz", timeout=5).status_code == 200


@pytest.mark.env_venvs(VF_GUESSING)
def test_a_chat_env_shows_its_messages(browser, start_server, tmp_path):
    from benchmarks.guessing_policy import bisect_guess
    from openenv_gym.importers import import_environment

    [imported] = import_environment(VF_GUESSING, "guessing", tmp_path)
    page = open_page(browser, start_server(str(imported.folder)))
    reset(page, 0)
    assert page.locator("#observation").is_hidden()  # a chat env's observation is its message list
    chat = page.locator("#chat .message")
    assert chat.evaluate_all("items => items.map(i => i.dataset.role)")[-1] == "user"
    assert "<guess>N</guess>" in chat.last.inner_text()
    for _ in range(10):
        reply = bisect_guess(page.inner_text("#chat"))
        page.fill("#text-action", reply)
        before = steps(page)
        page.click("#text-form button")
        page.wait_for_function(f"document.getElementById('history').children.length === {before + 1}")
        turn = page.locator("#history > li").last.locator(".message")
        assert turn.first.get_attribute("data-role") == "assistant" and turn.first.inner_text().endswith(reply)
        if "episode over" in page.inner_text("#outcome"):
            break
        assert page.locator("#chat .message").last.get_attribute("data-role") == "user"  # the env's answer
    assert "reward 1" in page.inner_text("#outcome")
    screenshot(page, "playground-chat", tmp_path)
    page.close()


@pytest.mark.bench  # (a load test: fifty browser tabs at once; make bench runs it, make test stays in its 20 minutes)
def test_fifty_tabs_at_once_each_their_own_session(browser, guess_url):
    context = browser.new_context()
    pages = [context.new_page() for _ in range(50)]
    errors = []
    for page in pages:
        page.on("pageerror", lambda error: errors.append(error))
        page.goto(http_url(guess_url) + "/web")
    for seed, page in enumerate(pages):
        page.bring_to_front()  # a background tab is not painted: Playwright's clicks wait for paints
        page.wait_for_function("document.getElementById('status').textContent.startsWith('connected')")
        reset(page, seed)
    assert health(guess_url)["sessions"] == 50  # every tab holds its own session, all at once
    for seed, page in enumerate(pages):
        page.bring_to_front()
        call(page, "guess", number="50")
        assert page.inner_text("#error") == "" and f"seed {seed}\n" in page.inner_text("#history > li >> nth=0")
    # each tab played its own number: the answers to the same guess follow each tab's own seed
    secrets = [random.Random(seed).randint(1, 100) for seed in range(50)]
    for secret, page in zip(secrets, pages, strict=True):
        expected = "correct" if secret == 50 else "higher" if secret > 50 else "lower"
        assert expected in page.inner_text("#observation")
    assert errors == []
    context.close()
    assert wait_until(lambda: health(guess_url)["sessions"] == 0)


# -- the episode viewer ---------------------------------------------------------------------------------------


@pytest.fixture
def viewer() -> Iterator:
    """viewer(path) -> the page's URL, served by `openenv-gym view` (stopped after the test)."""
    processes = []

    def start(path: Path) -> str:
        process = subprocess.Popen([sys.executable, "-m", "openenv_gym", "view", str(path), "--port", "0"],
                                   stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        processes.append(process)
        for line in process.stdout:
            if line.startswith("open "):
                return line.split()[1]
        raise AssertionError(f"openenv-gym view did not start: {process.stderr.read()}")

    yield start
    for process in processes:
        process.terminate()
        process.wait(timeout=10)


def shown(page) -> int:
    return int(page.inner_text("#count").strip("()").split()[0].replace(",", ""))


def test_the_viewer_opens_a_thousand_episodes_and_filters_them(browser, guess_url, viewer, tmp_path):
    path = tmp_path / "episodes.jsonl"
    with ThreadPoolExecutor(1) as thread:  # Playwright's sync API holds this thread's event loop
        episodes = thread.submit(run, write_episodes(path, guess_url, 1000)).result()
    page = browser.new_page(viewport={"width": 1000, "height": 900})
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(viewer(path))
    page.wait_for_function("document.getElementById('status').textContent.startsWith('click')")
    assert shown(page) == 1000 and page.locator("#episodes tbody tr").count() == 500  # listed in part
    finished = [e for e in episodes if e["error"] is None]
    bars = page.locator("#histogram .bar").evaluate_all("bars => bars.map(b => Number(b.dataset.count))")
    assert sum(bars) == len(finished) and max(bars) > 0

    page.fill("#min-return", "0.5")
    assert shown(page) == sum(e["total_reward"] >= 0.5 for e in episodes)
    page.fill("#max-return", "0.9")
    assert shown(page) == sum(0.5 <= e["total_reward"] <= 0.9 for e in episodes)
    page.click("#clear")
    page.fill("#task-filter", "seed 7")
    assert shown(page) == sum(f"seed {e['seed']}".startswith("seed 7") for e in episodes) == 111  # 7, 70.., 700..
    page.click("#clear")
    page.select_option("#ended", "failed")
    assert shown(page) == len(episodes) - len(finished) > 0
    page.select_option("#ended", "truncated")
    assert shown(page) == sum(e["truncated"] and e["error"] is None for e in episodes) > 0
    page.click("#clear")
    tallest = bars.index(max(bars))
    page.locator("#histogram .bar").nth(tallest).click()  # a bar filters to its returns
    low, high = float(page.input_value("#min-return")), float(page.input_value("#max-return"))
    assert shown(page) == sum(low <= e["total_reward"] <= high for e in episodes) >= max(bars)

    # one episode, turn by turn: the longest finished one
    page.click("#clear")
    longest = max(range(len(episodes)), key=lambda i: (episodes[i]["error"] is None, episodes[i]["steps"]))
    page.fill("#task-filter", f"seed {episodes[longest]['seed']}")
    page.click(f"#episodes tr[data-index='{longest}']")
    page.wait_for_selector("#episode-box:not([hidden])")
    episode = episodes[longest]
    turns = page.locator("#turns > li")
    assert turns.count() == episode["steps"] + 1  # the start, then one turn per step
    reward = f"{round(episode['rewards'][0], 4):g}"
    assert turns.nth(1).locator(".turn-title").inner_text() == f"turn 1 · reward {reward} · 3 completion tokens"
    calls = [m for m in episode["messages"] if m.get("tool_calls")]
    results = [m for m in episode["messages"] if m["role"] == "tool"]
    assert page.locator("#turns .tool-call").count() == len(calls) == episode["steps"]
    assert page.locator("#turns .tool-result").count() == len(results)
    assert page.locator("#turns .tool-result pre").last.inner_text() == results[-1]["content"]
    first_arguments = json.loads(calls[0]["tool_calls"][0]["function"]["arguments"])
    assert page.locator("#turns .tool-call pre").first.inner_text() == json.dumps(first_arguments, indent=2)
    thought = page.locator("#turns .reasoning").first  # a thinking model's reasoning, folded before its text
    assert thought.locator("pre").is_hidden()
    thought.locator("summary").click()
    assert thought.locator("pre").inner_text() == calls[0]["reasoning_content"]
    page.click("#clear")
    page.set_viewport_size({"width": 1000, "height": 1500})
    page.evaluate("window.scrollTo(0, 0)")
    screenshot(page, "viewer", tmp_path, full_page=False)
    assert errors == []
    page.close()


def test_the_viewer_reads_a_growing_file_and_reports_what_it_cannot_read(viewer, tmp_path):
    path = tmp_path / "episodes.jsonl"
    good = {"seed": 3, "options": {"split": "train", "index": 4}, "messages": [], "rewards": [0.5, 0.25],
            "terminated": True, "truncated": False, "info": {}, "error": None}
    path.write_text(json.dumps(good) + "\nnot json\n[1, 2]\n" + json.dumps(good | {"rewards": ["x"]}) + "\n\n")
    api = viewer(path) + "api/episodes"
    listing = httpx.get(api, timeout=5).json()
    assert [(e["task"], e["return"], e["steps"]) for e in listing["episodes"]] == [("train/4", 0.75, 2)]
    assert listing["bad_line_count"] == 3 and [b["line"] for b in listing["bad_lines"]] == [2, 3, 4]
    assert "rewards" in listing["bad_lines"][2]["reason"]

    line = json.dumps(good | {"seed": 9, "options": {}, "error": "policy: boom"}) + "\n"
    with path.open("a") as file:  # a rollout still writing: the unfinished line waits for its end
        file.write(line[:-6])
    assert len(httpx.get(api, timeout=5).json()["episodes"]) == 1
    with path.open("a") as file:
        file.write(line[-6:])
    episodes = httpx.get(api, timeout=5).json()["episodes"]
    assert [(e["task"], e["error"]) for e in episodes] == [("train/4", None), ("seed 9", "policy: boom")]
    assert httpx.get(f"{api}/1", timeout=5).json()["seed"] == 9  # read back whole from its place in the file

    missing = httpx.get(f"{api}/2", timeout=5)
    assert missing.status_code == 404 and "holds 2" in missing.json()["error"]["message"]
    assert httpx.get(f"{api}/-1", timeout=5).status_code == 404
    assert httpx.get(api.replace("api/episodes", "nowhere"), timeout=5).status_code == 404

    path.write_text(json.dumps(good | {"seed": 1, "options": {}}) + "\n")  # written anew: read from the start
    assert [e["task"] for e in httpx.get(api, timeout=5).json()["episodes"]] == ["seed 1"]


def test_the_viewer_shows_groups_side_by_side_widest_spread_first(browser, viewer, tmp_path):
    from conftest import env_path

    from openenv_gym.client.local import LocalServer

    path = tmp_path / "groups.jsonl"
    with LocalServer(env_path("contest"), 1, 100) as server, ThreadPoolExecutor(1) as thread:
        episodes = thread.submit(run, write_group_episodes(path, server.url, 30, 4)).result()
    by_group: dict[str, list[dict]] = {}
    for episode in episodes:
        by_group.setdefault(episode["group"], []).append(episode)
    failed = [e for e in episodes if e["error"] is not None]
    assert len(by_group) == 30 and failed  # some members failed: their groups came incomplete

    def spread(members):
        scores = [e["group_reward"] for e in members if e["error"] is None]
        return max(scores) - min(scores) if scores else 0.0

    page = browser.new_page(viewport={"width": 1000, "height": 1200})
    errors = []
    page.on("pageerror", lambda error: errors.append(error))
    page.goto(viewer(path))
    page.wait_for_function("document.getElementById('status').textContent.startsWith('click')")
    assert page.inner_text("#group-count") == "(30)"
    rows = page.locator("#groups tbody tr")
    shown_spreads = [float(s) for s in rows.locator(".spread").all_inner_texts()]
    assert shown_spreads == sorted(shown_spreads, reverse=True)
    assert shown_spreads == pytest.approx(sorted((spread(m) for m in by_group.values()), reverse=True), abs=1e-3)
    assert all(rows.nth(k).locator(".member").count() == 4 for k in range(30))
    assert page.locator("#groups .member.failed").count() == len(failed)

    widest = rows.first.get_attribute("data-group")
    members = sorted(by_group[widest], key=lambda e: e["group_member"])
    expected = [f"{e['group_reward']:.3f}" if e["error"] is None else "failed" for e in members]
    assert rows.first.locator(".member").all_inner_texts() == expected  # side by side, in member order
    rows.first.locator(".group-id").click()  # a group lists its episodes
    assert page.input_value("#group-filter") == widest and shown(page) == 4
    assert page.locator("#groups tbody tr").count() == 1
    page.locator("#groups .member").nth(3).click()  # a member opens its episode
    page.wait_for_selector("#episode-box:not([hidden])")
    index = episodes.index(members[3])
    assert page.inner_text("#episode-title").startswith(f"Episode {index} ")
    assert errors == []
    page.close()


def test_the_viewer_marks_the_turns_an_agent_program_asked_in_a_new_branch(browser, viewer, tmp_path):
    """An agent program that retries, calls a helper and compacts (tests/test_dialects.py): the viewer says which
    turns answered a request of a new branch, and what broke it."""
    from test_dialects import branch_episodes

    path = tmp_path / "branches.jsonl"
    with ThreadPoolExecutor(1) as thread:  # (Playwright's event loop is this thread's)
        episodes = thread.submit(branch_episodes, tmp_path / "branches").result()
    path.write_text("".join(json.dumps(episode.to_json()) + "\n" for episode in episodes))
    page = browser.new_page(viewport={"width": 1000, "height": 1200})
    page.goto(viewer(path))
    page.wait_for_function("document.getElementById('status').textContent.startsWith('click')")
    page.locator("#episodes tbody tr").first.click()
    page.wait_for_selector("#episode-box:not([hidden])")
    titles = page.locator(".turn-title").all_inner_texts()
    assert [title.split(" · ", 2)[-1] if "branch" in title else "" for title in titles] == [
        "", "", "", "", "branch 1: retry from turn 2", "branch 2: sub-agent", "branch 3: compaction"]
    page.close()


def test_view_says_what_is_wrong_with_its_arguments(tmp_path):
    done = subprocess.run([sys.executable, "-m", "openenv_gym", "view", str(tmp_path / "nope.jsonl")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "is not a file" in done.stderr and "--out" in done.stderr
