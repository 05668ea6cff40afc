"""openenv-gym's stand-in for uv and uvx in a Harbor task's sandbox (no network: nothing is downloaded). The tools
a task's test.sh asks for (uvx --with pytest==8.4.1 --with pytest-json-ctrf==0.3.5 pytest ...) are the
environment's venv's, installed at import; a Python version asked for (-p 3.13) is this interpreter.

    uvx [--with P | -w P | --from P | -p V | --python V]... COMMAND ARGS   -> COMMAND from the venv
    uv run [options] SCRIPT.py ARGS                                        -> python SCRIPT.py ARGS
    uv pip install ... / uv venv / uv --version                            -> nothing to do: said
"""

import importlib.metadata
import importlib.util
import os
import re
import sys

WITH_VALUE = {"--with", "-w", "--from", "-p", "--python", "--with-requirements", "--index-url", "--extra-index-url"}


def main(tool: str, arguments: list[str]) -> None:
    if tool == "uv":
        if arguments[:1] == ["run"]:
            arguments = arguments[1:]
        elif arguments[:1] in (["pip"], ["venv"], ["sync"], ["--version"], ["self"]):
            print(f"openenv-gym: 'uv {' '.join(arguments)}' is not run here: the environment's venv is ready",
                  file=sys.stderr)
            sys.exit(0)
    wanted, command = [], []
    index = 0
    while index < len(arguments):
        argument = arguments[index]
        if argument in WITH_VALUE:
            if argument in ("--with", "-w", "--from"):
                wanted.append(arguments[index + 1])
            index += 2
        elif argument.startswith("-") and not command:
            index += 1
        else:
            command = arguments[index:]
            break
    if not command:
        sys.exit(f"openenv-gym: {tool} {' '.join(arguments)}: no command to run")
    missing = [name for name in (re.split(r"[=<>!~\[ ]", package)[0] for package in wanted) if not installed(name)]
    if missing:
        sys.exit(f"openenv-gym: {tool} asks for {', '.join(missing)}, which this environment's venv has not: it "
                 "runs offline, so add the package to the environment's dependencies")
    program = command[0]
    if program.endswith(".py"):
        os.execv(sys.executable, [sys.executable, *command])
    if importlib.util.find_spec(program.replace("-", "_")) is not None:
        os.execv(sys.executable, [sys.executable, "-m", program.replace("-", "_"), *command[1:]])
    os.execvp(program, command)


def installed(distribution: str) -> bool:
    try:
        importlib.metadata.distribution(distribution)
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
