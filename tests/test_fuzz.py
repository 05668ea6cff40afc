"""A few hundred fuzzed frames against a real server (benchmarks/fuzz.py; `make bench` sends 10,000)."""

import pytest
from conftest import health, wait_until

from benchmarks.fuzz import fuzz


@pytest.mark.timeout(300)
def test_fuzzed_frames_get_typed_answers_and_leave_nothing_behind(start_server, capfd):
    url = start_server("echo")
    fuzzer = fuzz(url, frames=300)
    assert fuzzer.frames >= 300 and fuzzer.answers > fuzzer.frames  # every frame was answered, typed
    assert {"bad_frame", "bad_request", "unknown_op"} <= set(fuzzer.errors)
    assert fuzzer.sessions  # real sessions were made, and named by later frames
    assert wait_until(lambda: health(url)["sessions"] == 0)  # closed with the connection: none leaked
    assert "Traceback" not in capfd.readouterr().err  # nothing crashed in the server
