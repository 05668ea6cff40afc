from shell_dialects.harness import ShellDialectsHarness
from shell_dialects.taskset import ShellDialectsTaskset

__all__ = ["ShellDialectsHarness", "ShellDialectsTaskset"]
