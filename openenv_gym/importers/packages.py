"""The sources `openenv-gym import` takes besides a folder or a .py file: a wheel (.whl), an sdist (.tar.gz, .zip),
or a requirement naming a package on the package index (`name==version`, `name`), which this Python's pip
downloads without its dependencies, as pip is configured here (`pip config list`). An archive is unpacked into a
temporary folder, safely (nothing lands outside it), and imported as that folder; the folder is removed after.
"""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import tarfile
import tempfile
import zipfile
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.requirements import InvalidRequirement, Requirement

from openenv_gym.importers.base import ImportFailedError
from openenv_gym.importers.vendor import MAX_TOTAL_BYTES

ARCHIVES = (".whl", ".zip", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar")
SOURCE_FORMS = ("SOURCE is a .py file, a folder, a wheel (.whl), an sdist (.tar.gz, .zip), or a package on the "
                "package index (name==version, or name)")
DOWNLOAD_TIMEOUT = 1800.0  # seconds pip may take to download one package
PIP_TAIL = 12  # lines of pip's output shown when a download fails
# pip's words for an index it could not reach (it then says it found no version, as for a name it does not know)
UNREACHABLE = ("Could not fetch URL", "connection broken by", "NewConnectionError", "ConnectTimeoutError",
               "Max retries exceeded")
_NO_VERSION = re.compile(r"Could not find a version that satisfies the requirement (.+?) \(from versions: (.*?)\)")


@dataclass(frozen=True)
class LocalSource:
    path: Path  # what the importers read: the source as given, or the package unpacked
    origin: str  # what the manifest records as imported_from: the path given, or the requirement


@contextmanager
def local_source(source: str, say: Callable[[str], None]) -> Iterator[LocalSource]:
    """SOURCE as a local folder or file: itself, or (a wheel, an sdist, a package on the index) unpacked into a
    temporary folder, removed when the block ends. `say` is told of each download and unpacking."""
    path = Path(source).expanduser()
    if path.exists() and not (path.is_file() and path.name.endswith(ARCHIVES)):
        yield LocalSource(path, str(path.resolve()))  # a word that names a local path stays a path
        return
    requirement = None if path.exists() else _requirement(source)
    with tempfile.TemporaryDirectory(prefix="openenv-gym-package-") as scratch:
        archive = path if requirement is None else download(requirement, Path(scratch) / "download", say)
        root = unpack(archive, Path(scratch) / "unpacked" / _stem(archive.name), say)
        try:
            yield LocalSource(root, str(path.resolve()) if requirement is None else requirement)
        except ImportFailedError as exc:  # the temporary folder the message names is removed: say what it held
            raise ImportFailedError(f"{archive.name}, unpacked: {exc}") from None


def _stem(name: str) -> str:
    return next((name.removesuffix(suffix) for suffix in ARCHIVES if name.endswith(suffix)), name)


def _requirement(source: str) -> str:
    """SOURCE as a requirement for pip: it is one, and does not read as a path (a missing file, then)."""
    path_like = source.endswith((".py", *ARCHIVES)) or source.startswith((".", "~")) or "/" in source
    try:
        parsed = Requirement(source)
    except InvalidRequirement as exc:
        if path_like:
            raise _missing(source) from None
        why = str(exc).splitlines()[0]
        raise ImportFailedError(f"{source} does not exist, and is not a requirement either ({why}); {SOURCE_FORMS}") \
            from None
    if path_like and parsed.url is None:  # `name @ https://...` names a file on a server: pip downloads it
        raise _missing(source)
    return source


def _missing(source: str) -> ImportFailedError:
    return ImportFailedError(f"{source} does not exist (relative paths are read from {Path.cwd()}); {SOURCE_FORMS}")


def download(requirement: str, folder: Path, say: Callable[[str], None]) -> Path:
    """The one file pip downloads for `requirement` into `folder`, without its dependencies."""
    if importlib.util.find_spec("pip") is None:
        raise ImportFailedError(f"downloading {requirement} needs pip, which this Python ({sys.executable}) lacks: "
                                f"install it (python -m ensurepip), or download the package yourself (pip download "
                                f"--no-deps {requirement}) and import the file")
    say(f"downloading {requirement} with pip (its dependencies are installed later, in the environment's venv)")
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--progress-bar", "off", "--dest", str(folder),
               requirement]
    try:
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=DOWNLOAD_TIMEOUT)
    except subprocess.TimeoutExpired:
        raise ImportFailedError(f"downloading {requirement} took longer than {DOWNLOAD_TIMEOUT:g} s; check the "
                                "network and pip's index settings (pip config list)") from None
    files = sorted(folder.iterdir()) if folder.is_dir() else []
    if done.returncode != 0 or len(files) != 1:
        raise ImportFailedError(_download_failure(requirement, done.stdout, done.returncode))
    say(f"downloaded {files[0].name} ({files[0].stat().st_size / 1e3:,.0f} kB)")
    return files[0]


def _download_failure(requirement: str, output: str, code: int) -> str:
    lines = output.strip().splitlines()
    said = "\n".join(lines[-PIP_TAIL:])
    looked = next((line.strip() for line in lines if line.startswith("Looking in indexes")),
                  "pip config list shows where pip looks")
    # releases for another Python: pip lists them apart and says it found none
    ignored = "".join(f"; pip: {line.removeprefix('ERROR: ')}" for line in lines if "Ignored the following" in line)
    missing = _NO_VERSION.search(output)
    if missing and any(words in output for words in UNREACHABLE):
        return (f"the package index could not be reached to download {requirement}; check the network and pip's "
                f"index settings (pip config list, PIP_INDEX_URL). pip said:\n{said}")
    if missing and missing.group(2) == "none":
        return (f"no package {Requirement(requirement).name} was found on the package index ({looked}); check its "
                f"name, or import a local folder, wheel or sdist{ignored}")
    if missing:
        versions = missing.group(2).split(", ")
        shown = ", ".join(versions[-10:]) + (f" and {len(versions) - 10} older" if len(versions) > 10 else "")
        return f"no release of {requirement} is on the package index (it has {shown}); ask for one of those{ignored}"
    return (f"downloading {requirement} with pip failed (exit {code}); fix what pip says, or download the package "
            f"yourself and import the file. pip said:\n{said}")


def unpack(archive: Path, folder: Path, say: Callable[[str], None]) -> Path:
    """The root of `archive` unpacked into `folder`: an sdist's one top folder (name-version/), else `folder`."""
    say(f"unpacking {archive.name}")
    folder.mkdir(parents=True)
    try:
        if zipfile.is_zipfile(archive):
            _unzip(archive, folder)
        elif tarfile.is_tarfile(archive):
            _untar(archive, folder)
        else:
            raise ImportFailedError(f"{archive} is neither a zip archive (.whl, .zip) nor a tar archive (.tar.gz); "
                                    f"{SOURCE_FORMS}")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError, zlib.error, OSError) as exc:
        raise _unsafe(archive, str(exc)) from None
    entries = list(folder.iterdir())
    return entries[0] if len(entries) == 1 and entries[0].is_dir() else folder


def _unzip(archive: Path, folder: Path) -> None:
    with zipfile.ZipFile(archive) as zipped:
        members = zipped.infolist()
        for member in members:  # zipfile would rename such paths silently; a package never holds one
            path = PurePosixPath(member.filename.replace("\\", "/"))
            if path.is_absolute() or ".." in path.parts:
                raise _unsafe(archive, f"{member.filename!r} would be written outside the folder it is unpacked into")
        _within_cap(archive, sum(member.file_size for member in members))
        zipped.extractall(folder)


def _untar(archive: Path, folder: Path) -> None:
    if not hasattr(tarfile, "data_filter"):
        raise ImportFailedError("unpacking a tar archive safely needs tarfile's data filter (Python 3.11.4 or "
                                f"later; this is {sys.version.split()[0]}): upgrade Python, or import the package's "
                                "wheel")
    with tarfile.open(archive) as tar:
        _within_cap(archive, sum(member.size for member in tar.getmembers()))
        tar.extractall(folder, filter="data")  # refuses absolute paths, '..', links out of the folder, devices


def _unsafe(archive: Path, why: str) -> ImportFailedError:
    return ImportFailedError(f"{archive.name} cannot be unpacked safely ({why}); an archive whose paths leave its "
                             "folder (absolute paths, '..', links or devices) is refused. Build the package again "
                             "with a standard tool (pip wheel, python -m build, uv build)")


def _within_cap(archive: Path, size: int) -> None:
    if size > MAX_TOTAL_BYTES:
        raise ImportFailedError(f"{archive.name} unpacks to {size / 2**30:.1f} GiB, more than the "
                                f"{MAX_TOTAL_BYTES // 2**30} GiB an import takes; it is not an environment's package")
