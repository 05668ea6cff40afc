"""Every code block of the README and docs/ runs here, or says why not.

A block's fence names its language. Python blocks run, page by page in one process each, in the order the page gives
them (as a reader would type them in one session), in a scratch folder; `sh` blocks run in bash there, each alone.
JSON blocks parse (one value or several in a row); TOML blocks parse, and a manifest (one with `kind`) holds only
keys of its kind. `text` (output, usage) and `bibtex` are not code. A block that is code but cannot run here (a
cluster, a GPU, a model server, a placeholder a reader fills in) says so on the line before its fence:

    <!-- not run: a Ray cluster -->
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from conftest import ROOT

from benchmarks.doc_blocks import blocks_of
from openenv_gym.manifests.schema import KINDS

PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
RUN = {"python", "sh"}
PARSED = {"json", "toml"}
NOT_CODE = {"text", "bibtex"}


ALL = [block for page in PAGES for block in blocks_of(page)]


def test_every_block_names_its_language_and_every_skip_says_why():
    unnamed = [str(b) for b in ALL if b.language not in RUN | PARSED | NOT_CODE]
    assert not unnamed, f"blocks whose fence names no language of {sorted(RUN | PARSED | NOT_CODE)}: {unnamed}"
    pointless = [str(b) for b in ALL if b.not_run and b.language in NOT_CODE]
    assert not pointless, f"'not run' on blocks that are not code: {pointless}"


@pytest.mark.parametrize("block", [b for b in ALL if b.language == "json"], ids=str)
def test_json_blocks_parse(block):
    decoder, text, at = json.JSONDecoder(), block.code, 0
    values = 0
    while (at := len(text) - len(text[at:].lstrip())) < len(text):
        _, at = decoder.raw_decode(text, at)
        values += 1
    assert values


@pytest.mark.parametrize("block", [b for b in ALL if b.language == "toml"], ids=str)
def test_toml_blocks_parse_and_manifests_hold_their_kinds_keys(block):
    data = tomllib.loads(block.code)
    kind = data.get("kind")
    if kind is not None:
        fields = set(KINDS[kind].model_fields)
        assert set(data) <= fields, f"keys a {kind} manifest does not take: {sorted(set(data) - fields)}"


def _environment() -> dict[str, str]:
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    return {**os.environ, "PATH": path, "PYTHONPATH": str(ROOT), "MPLBACKEND": "Agg"}


def _scratch(tmp_path: Path) -> Path:
    """A scratch folder where the paths the docs name from the checkout's root (tests/..., benchmarks/...) lead to
    the checkout's, and what a block writes (servers/, dist/) stays."""
    for name in ("tests", "benchmarks", "examples"):
        (tmp_path / name).symlink_to(ROOT / name)
    return tmp_path


RUN_PAGES = sorted({b.page for b in ALL if b.language in RUN and not b.not_run})


@pytest.mark.parametrize("page", RUN_PAGES, ids=lambda page: str(page.relative_to(ROOT)))
def test_the_blocks_of_each_page_run(page, tmp_path):
    """A page's shell blocks first (the imports it shows), each alone in bash; then its Python blocks, in one
    process, in the order the page gives them."""
    scratch = _scratch(tmp_path)
    runnable = [b for b in ALL if b.page == page and b.language in RUN and not b.not_run]
    for block in (b for b in runnable if b.language == "sh"):
        done = subprocess.run(["bash", "-e", "-o", "pipefail", "-c", block.code], cwd=scratch, env=_environment(),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, f"{block} failed:\n{done.stdout[-1500:]}\n{done.stderr[-3000:]}"
    python = [b for b in runnable if b.language == "python"]
    if python:
        (scratch / "page.py").write_text("\n\n".join(f"# {block}\n{block.code}" for block in python))
        done = subprocess.run([sys.executable, "page.py"], cwd=scratch, env=_environment(), capture_output=True,
                              text=True, timeout=600)
        assert done.returncode == 0, f"{page.relative_to(ROOT)}'s Python blocks failed:\n{done.stderr[-3000:]}"
