"""How an environment's venv is made and filled: with uv when it can be had (the `uv` package ships its binary), in
seconds, linking files from one shared cache; else, or when OPENENV_GYM_INSTALLER=pip, with the standard library's
venv and pip.

uv reads no pip configuration, so the machine's pip settings are carried over to it: indexes, local wheel folders
(find-links), constraint files and the certificate, from `pip config list` (files and PIP_* variables alike).
Where a package is found on several indexes, every index's versions count, as with pip.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

INSTALLER_VARIABLE = "OPENENV_GYM_INSTALLER"  # "uv" (the default) or "pip"
PIP_CONFIG_TIMEOUT = 30.0
# pip's settings (as `pip config list` names them) and uv's flag for each; several values are space-separated
_FLAGS = {"index-url": "--index-url", "extra-index-url": "--extra-index-url", "find-links": "--find-links",
          "constraint": "--constraint"}


def uv_binary() -> str | None:
    """The uv executable of this Python's environment, if the uv package is installed."""
    try:
        from uv import find_uv_bin
    except ImportError:
        return None
    try:
        return find_uv_bin()
    except FileNotFoundError:
        return None


@dataclass
class PipSettings:
    """What uv must be told of pip's configuration here."""

    flags: list[str] = field(default_factory=list)
    environment: dict[str, str] = field(default_factory=dict)


def pip_settings() -> PipSettings:
    """pip's configuration of this machine (global, user, site files and PIP_* variables), as uv flags."""
    try:
        listed = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True,
                                timeout=PIP_CONFIG_TIMEOUT).stdout
    except (OSError, subprocess.TimeoutExpired):
        listed = ""
    values: dict[str, list[str]] = {}
    for line in listed.splitlines():  # `global.find-links='/opt/wheels'`, `:env:.find-links='/opt/wheels'`
        name, _, value = line.partition("=")
        key = name.rsplit(".", 1)[-1]
        for item in (part for quoted in shlex.split(value) for part in quoted.split()):
            values.setdefault(key, [])
            if item not in values[key]:
                values[key].append(item)
    settings = PipSettings()
    for key, flag in _FLAGS.items():
        for value in values.get(key, []):
            settings.flags += [flag, value]
    if values.get("no-index"):
        settings.flags.append("--no-index")
    if values.get("cert"):
        settings.environment["SSL_CERT_FILE"] = values["cert"][-1]
    if values.get("default-timeout"):
        settings.environment["UV_HTTP_TIMEOUT"] = values["default-timeout"][-1]
    return settings


@dataclass
class Installer:
    """The commands that make a venv, install requirements into it and list what it holds."""

    uv: str | None
    settings: PipSettings = field(default_factory=PipSettings)

    @classmethod
    def here(cls) -> Installer:
        choice = os.environ.get(INSTALLER_VARIABLE, "uv")
        if choice not in ("uv", "pip"):
            raise ValueError(f"{INSTALLER_VARIABLE}={choice!r}: use uv (the default, when it is installed) or pip")
        uv = uv_binary() if choice == "uv" else None
        return cls(uv, pip_settings() if uv else PipSettings())

    @property
    def name(self) -> str:
        return "uv" if self.uv else "pip"

    @property
    def environment(self) -> dict[str, str]:
        return os.environ | self.settings.environment

    def create(self, venv: Path, interpreter: str = sys.executable) -> list[str]:
        if self.uv:
            return [self.uv, "venv", "--quiet", "--python", interpreter, str(venv)]
        return [interpreter, "-m", "venv", str(venv)]

    def install(self, venv: Path, requirements: list[str], constraints: Path | None = None,
                resolve_as: str | None = None) -> list[str]:
        """With `resolve_as`, packages are resolved for that Python version (their requires-python checked against it
        rather than the venv's own)."""
        python = str(venv / "bin" / "python")
        constrained = ["--constraint", str(constraints)] if constraints else []
        if self.uv:
            # compiled now, as pip compiles: else every process started in the venv compiles what it imports
            # (seconds for verifiers' dependencies) wherever bytecode is not written (PYTHONDONTWRITEBYTECODE)
            relaxed = ["--python-version", resolve_as] if resolve_as else []
            return [self.uv, "pip", "install", "--python", python, "--index-strategy", "unsafe-best-match",
                    "--compile-bytecode", *relaxed, *self.settings.flags, *constrained, *requirements]
        relaxed = ["--ignore-requires-python"] if resolve_as else []
        return [python, "-m", "pip", "install", "--disable-pip-version-check", *relaxed, *constrained,
                *requirements]

    def freeze(self, venv: Path) -> list[str]:
        """What the venv holds, one `name==version` a line, editable installs left out."""
        python = str(venv / "bin" / "python")
        if self.uv:
            return [self.uv, "pip", "freeze", "--python", python, "--exclude-editable"]
        return [python, "-m", "pip", "freeze", "--exclude-editable"]
