"""The fenced code blocks of a Markdown page, each with its language and, where the line before its fence says
`<!-- not run: why -->`, why it does not run. Read by tests/test_doc_blocks.py (every block runs or says why not)
and benchmarks/newcomer.py (the README's commands, in order)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

SKIP = re.compile(r"<!-- not run: (\S.*?) -->")
ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Block:
    page: Path
    line: int  # of its opening fence
    language: str
    code: str
    not_run: str | None  # why, when it says so

    def __str__(self) -> str:
        where = self.page.relative_to(ROOT) if self.page.is_relative_to(ROOT) else self.page
        return f"{where}:{self.line} ({self.language or 'no language'})"


def blocks_of(page: Path) -> list[Block]:
    """The page's blocks, in order (an indented fence, in a list item, is read without its indent)."""
    found, lines = [], page.read_text().splitlines()
    index = 0
    while index < len(lines):
        fence = re.match(r"^( *)```(\S*)\s*$", lines[index])
        if fence is None:
            index += 1
            continue
        indent, start = fence.group(1), index
        end = next(k for k in range(index + 1, len(lines)) if lines[k].strip() == "```")
        code = "\n".join(line.removeprefix(indent) for line in lines[start + 1:end])
        before = lines[start - 1] if start else ""
        skip = SKIP.search(before)
        found.append(Block(page, start + 1, fence.group(2), code, skip.group(1) if skip else None))
        index = end + 1
    return found


