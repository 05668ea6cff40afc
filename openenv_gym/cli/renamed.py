"""Options that were renamed for one vocabulary across commands (--env-url: env servers; --model-url: the model
server; --output: a file written; --json: a flag, the output as JSON). The old name still works and says the new
one on stderr; it is hidden from --help."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any


class _Renamed(argparse.Action):
    def __init__(self, option_strings: list[str], dest: str, new: str, **kwargs: Any) -> None:
        self.new = new
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        say_renamed(parser, option_string, self.new)
        setattr(namespace, self.dest, values)


def say_renamed(parser: argparse.ArgumentParser, old: str | None, new: str) -> None:
    print(f"{parser.prog}: {old} is now {new}; the old name will go in a later release", file=sys.stderr)


def add_renamed(parser: argparse.ArgumentParser | Any, old: str, new: argparse.Action) -> None:
    """`old` as a hidden alias of the option `new` (the Action add_argument returned), taking what it takes."""
    parser.add_argument(old, dest=new.dest, nargs=new.nargs, type=new.type, action=_Renamed,
                        new=new.option_strings[0], help=argparse.SUPPRESS)


class _JsonFlag(argparse.Action):
    """--json as a flag; `--json PATH`, its old form, writes PATH as --output does."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        if values is None:
            namespace.json = True
            return
        say_renamed(parser, "--json PATH", "--output PATH (--json is a flag: the output as JSON)")
        namespace.output = Path(values)


def add_json_flag(parser: argparse.ArgumentParser, help: str) -> None:
    parser.add_argument("--json", nargs="?", default=False, action=_JsonFlag, metavar="", help=help)
