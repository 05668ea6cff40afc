"""Print the pip arguments that install a CPU-only torch, so `make` never pulls the CUDA build (several GB).

A plain `pip install torch` on Linux takes the CUDA build from PyPI. This prefers a CPU wheel in pip's own
find-links folders (machines that keep one on disk), and otherwise PyTorch's CPU index.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from packaging.tags import sys_tags
from packaging.utils import parse_wheel_filename

CPU_INDEX = "https://download.pytorch.org/whl/cpu"


def find_links() -> list[Path]:
    listing = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
    folders = []
    for line in listing.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("find-links"):
            folders += [Path(part.removeprefix("file://")) for part in value.strip("'\"").split()]
    return [folder for folder in folders if folder.is_dir()]


def local_cpu_wheel() -> Path | None:
    supported = set(sys_tags())
    found = []
    for folder in find_links():
        for wheel in folder.glob("torch-*+cpu-*.whl"):
            _, version, _, tags = parse_wheel_filename(wheel.name)
            if tags & supported:
                found.append((version, wheel))
    return max(found)[1] if found else None


if __name__ == "__main__":
    wheel = local_cpu_wheel()
    print(wheel if wheel else f"torch --index-url {CPU_INDEX} --extra-index-url https://pypi.org/simple")
