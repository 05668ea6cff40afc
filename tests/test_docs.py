"""The docs stay true to the code: the command reference is the parsers' own, every command is named in the top-level
help, every environment variable the code reads is in the table of docs/serving.md."""

import re

from conftest import ROOT

from openenv_gym.cli import build_parser
from openenv_gym.cli.reference import _subcommands, markdown


def test_the_command_reference_is_what_the_parsers_say():
    written = (ROOT / "docs" / "cli.md").read_text()
    assert written == markdown(), ("docs/cli.md differs from the parsers: write it again with "
                                   "python -m openenv_gym.cli.reference > docs/cli.md")


def test_the_top_level_help_names_every_command():
    parser = build_parser()
    summary = parser.format_help()
    for name, help_text, _ in _subcommands(parser):
        assert help_text, f"the command {name} has no one-line help"
        assert re.search(rf"\b{name}\b", parser.description or ""), f"{name} is missing from the summary line"
        assert f"    {name} " in summary


def test_every_environment_variable_the_code_reads_is_in_the_table():
    read = set()
    for folder in ("openenv_gym", "servers", "deploy"):
        for path in (ROOT / folder).rglob("*"):
            if path.is_file() and path.suffix in ("", ".py", ".yaml", ".toml", ".sh") and \
                    "__pycache__" not in path.parts:
                read |= set(re.findall(r"OPENENV_GYM_[A-Z_]*[A-Z]", path.read_text(errors="replace")))
    table = (ROOT / "docs" / "serving.md").read_text().partition("## Environment variables")[2]
    documented = set(re.findall(r"^\| `(OPENENV_GYM_[A-Z_]+)`", table, re.MULTILINE))
    assert read, "no variable found: the search is wrong"
    assert read <= documented, f"not in docs/serving.md's table: {sorted(read - documented)}"
    assert documented <= read, f"in the table, read nowhere: {sorted(documented - read)}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped (but '-' and '_'), spaces as '-'."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(page) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
    return {_slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_every_link_between_the_docs_leads_somewhere():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        text = re.sub(r"```.*?```", "", page.read_text(), flags=re.DOTALL)
        for target in re.findall(r"\]\(([^)\s]+)\)", text):
            if re.match(r"[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            goal = (page.parent / path).resolve() if path else page
            if not goal.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and goal.suffix == ".md" and anchor not in _anchors(goal):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)
