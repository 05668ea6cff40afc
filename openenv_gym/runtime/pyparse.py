"""Python's `ast.parse`, safe to call from several threads at once.

On CPython 3.11 the AST constructor keeps its recursion depth in interpreter-wide state, so two threads parsing at
once can fail with "SystemError: AST constructor recursion depth mismatch" (CPython gh-106905). It happens to us:
imports run side by side, and a server reads long actions in threads while its loop reads short ones. Every parse
of openenv_gym goes through this one lock.
"""

from __future__ import annotations

import ast
import threading

_lock = threading.Lock()


def parse(source: str, filename: str = "<unknown>", mode: str = "exec") -> ast.AST:
    with _lock:
        return ast.parse(source, filename=filename, mode=mode)
