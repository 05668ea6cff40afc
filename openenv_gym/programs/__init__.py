"""Episode programs: started warm from a fork server (program.py), each in its sandbox when it has one (child.py,
the program's side). Light on purpose: the fork server imports child.py, and every program is a copy of it."""

from openenv_gym.programs.child import STDIN, ProgramSpec, confine
from openenv_gym.programs.environ import inherited_environ
from openenv_gym.programs.program import Program, run_to_end, warm_up

__all__ = ["STDIN", "Program", "ProgramSpec", "confine", "inherited_environ", "run_to_end", "warm_up"]
