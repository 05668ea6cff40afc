"""docs/cli.md, written from the command's own parsers: every command and every flag, so the reference cannot
say what the command does not do (tests/test_docs.py fails when the file and the parsers differ).

    python -m openenv_gym.cli.reference > docs/cli.md
"""

from __future__ import annotations

import argparse

HEADER = """# The `openenv-gym` command

Every command and every option, written from the command's own parsers
(`python -m openenv_gym.cli.reference > docs/cli.md`; a test fails when they differ). `openenv-gym COMMAND --help`
says the same in a terminal. Options renamed for one vocabulary still take their old names, which say the new ones:
`--base-url` (now `--env-url` in `bench`, `--model-url` in `rollout`), `--out` (now `--output`), `bench --json PATH`
(now `--output PATH`), `import --env` (now `--class`).
"""


def _subcommands(parser: argparse.ArgumentParser) -> list[tuple[str, str, argparse.ArgumentParser]]:
    """(name, one-line help, parser) of each subcommand of `parser`, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            return [(name, helps.get(name, ""), sub) for name, sub in action.choices.items()]
    return []


def _option_row(action: argparse.Action) -> str:
    many = " ..." if action.nargs in ("+", "*") else ""
    if not action.option_strings:
        names = f"`{action.metavar or action.dest}`{many}"
    elif action.nargs == 0 or action.metavar == "":  # a flag (bench's --json: a flag with an old form)
        names = ", ".join(f"`{name}`" for name in action.option_strings)
    else:
        names = ", ".join(f"`{name}`" for name in action.option_strings) + \
            f" `{action.metavar or action.dest.upper()}`{many}"
    said = [" ".join((action.help or "").split()).replace("|", "\\|")]
    if action.choices:
        said.append(f"one of {', '.join(f'`{choice}`' for choice in action.choices)}")
    if action.required and action.option_strings:
        said.append("required")
    return f"| {names} | {'; '.join(said)} |"


def _section(path: str, summary: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    lines = [f"{'#' * level} `{path}`", ""]
    description = " ".join((parser.description or summary).split())
    if description:
        lines += [description, ""]
    usage = " ".join(parser.format_usage().removeprefix("usage: ").split())
    lines += ["```text", usage, "```", ""]
    shown = [action for action in parser._actions
             if action.help != argparse.SUPPRESS and not isinstance(action, (argparse._HelpAction,
                                                                             argparse._SubParsersAction))]
    if shown:
        lines += ["| argument | what it does |", "|---|---|", *map(_option_row, shown), ""]
    for name, help_text, sub in _subcommands(parser):
        lines += _section(f"{path} {name}", help_text, sub, min(level + 1, 4))
    return lines


def markdown() -> str:
    from openenv_gym.cli import build_parser

    parser = build_parser()
    lines = [HEADER, "| command | what it does |", "|---|---|"]
    lines += [f"| [`{name}`](#openenv-gym-{name}) | {' '.join(text.split())} |"
              for name, text, _ in _subcommands(parser)]
    lines.append("")
    for name, text, sub in _subcommands(parser):
        lines += _section(f"openenv-gym {name}", text, sub, 2)
    return "\n".join(lines).rstrip() + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
