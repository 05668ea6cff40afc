from pathlib import Path


def test_the_greeting_is_the_seed_upper_cased():
    assert Path("/app/greeting.txt").read_text().strip() == "HELLO, HARBOR"


def test_the_image_setup_ran():
    assert Path("/app/out/build.txt").read_text() == "made at build\n"
