"""The playground page, GET /web, in a real browser: Playwright driving Debian's Chromium (make test installs
it; Playwright's own browser download cannot be reached here)."""

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from conftest import ROOT, health, http_url, wait_until

CHROMIUM = Path("/usr/bin/chromium")


@pytest.fixture(scope="module")
def browser() -> Iterator:
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), f"the browser tests need Chromium at {CHROMIUM}: make test installs it"
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=str(CHROMIUM), args=["--no-sandbox"])
        yield browser
        browser.close()


def open_page(browser, url: str):
    page = browser.new_page()
    page.goto(http_url(url) + "/web")
    page.wait_for_function("document.getElementById('status').textContent.startsWith('connected')")
    return page


def steps(page) -> int:
    return page.locator("#history li").count()


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


def test_a_guess_episode_played_to_the_end_through_the_forms(browser, guess_url):
    page = open_page(browser, guess_url)
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
    assert steps(page) >= 2 and "terminated true" in page.locator("#history li").last.inner_text()
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
