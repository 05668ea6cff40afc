"""The environment an episode's program inherits from the server: only what a program needs to run as the server's
programs would (its PATH, locale, Python's and the package tools' settings, certificate bundles, thread counts),
never what is secret or the server's alone: a name that says secret (a model provider's key, a token), a value that
holds a password (`https://user:password@index/`), openenv-gym's own settings. Whatever a program holds, a policy
can make it print."""

from __future__ import annotations

import os
import re

from openenv_gym.errors import EnvError

PASSED = re.compile(
    r"PATH|LANG|LANGUAGE|LC_\w+|TZ|TERM|COLORTERM|NO_COLOR|FORCE_COLOR|COLUMNS|LINES|PYTHON\w*|VIRTUAL_ENV|"
    r"CONDA_PREFIX|SSL_CERT_FILE|SSL_CERT_DIR|REQUESTS_CA_BUNDLE|CURL_CA_BUNDLE|NODE_EXTRA_CA_CERTS|NODE_OPTIONS|"
    r"UV_\w+|PIP_\w+|HF_\w+|TRANSFORMERS_\w+|TOKENIZERS_PARALLELISM|OMP_NUM_THREADS|MKL_NUM_THREADS|"
    r"OPENBLAS_NUM_THREADS|CUDA_VISIBLE_DEVICES")
SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSW|CREDENTIAL|AUTH|SESSION|COOKIE|PRIVATE", re.IGNORECASE)
SECRET_VALUE = re.compile(r"://[^/@\s]*:[^/@\s]*@")  # a URL's user:password


def inherited_environ() -> dict[str, str]:
    return {name: value for name, value in os.environ.items()
            if PASSED.fullmatch(name) and not SECRET_NAME.search(name) and not SECRET_VALUE.search(value)}


VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


def expand(text: str, environ: dict[str, str], where: str) -> str:
    """`text` with each "${NAME}" in it the program's NAME (from `environ`); EnvError naming one it has not."""
    def value(found: re.Match) -> str:
        if found[1] not in environ:
            raise EnvError(f"{where} names ${{{found[1]}}}, which the program's environment has not (it has "
                           f"{', '.join(sorted(environ))})")
        return environ[found[1]]
    return VARIABLE.sub(value, text)
