"""Which files of a source may hold secrets: by their name or folder, and by what they contain.

An import copies a checkout into a folder that is shared, packed into images and served; a credential that
rides along leaks. A file is left out when its name is one that tools keep credentials in, when it lies in
a folder they keep credentials in, or when its text holds a private key, a JSON `private_key` or a token
with a provider's well-known prefix.
"""

from __future__ import annotations

import fnmatch
import re
from pathlib import Path

SECRET_NAMES = (
    ".env", ".env.*", "*.pem", "*.key", "id_rsa*", "id_ed25519*", "id_ecdsa*", "id_dsa*", "*.p12", "*.pfx",
    "*.jks", "*.keystore", "secrets.*", "*_secret.*", "*_secrets.*", "credentials*", "*credentials*.json",
    ".netrc", ".pypirc", ".git-credentials", ".npmrc", ".yarnrc.yml", ".htpasswd", "authorized_keys",
    "known_hosts", "token.json", "tokens.json", "*service-account*.json", "*service_account*.json",
    "kubeconfig*", ".dockercfg", ".boto", ".s3cfg", ".pgpass", ".my.cnf", "*.ovpn")
SECRET_DIRS = (".ssh", ".aws", ".kube", ".gnupg", ".docker", ".azure", ".gcloud", ".config/gcloud")

SCANNED_BYTES = 2**20  # a secret is looked for in a file's first MiB

_CONTENT = (
    (re.compile(rb"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----"), "holds a private key"),
    (re.compile(rb'"(?:private_key|client_secret|refresh_token)"\s*:\s*"[^"\s]'), "holds a credential field"),
    (re.compile(rb"\b(?:gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{40,}|glpat-[A-Za-z0-9_-]{20}"
                rb"|xox[abposr]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|ASIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{35}"
                rb"|sk-(?:proj-|ant-)?[A-Za-z0-9_-]{32,}|hf_[A-Za-z0-9]{34}|npm_[A-Za-z0-9]{36}"
                rb"|pypi-AgE[A-Za-z0-9_-]{50,}|sk_live_[A-Za-z0-9]{24,})"), "holds an access token"),
)


def secret_by_name(relative: Path) -> bool:
    """A file or folder whose name, or whose folder, is where tools keep credentials."""
    posix = relative.as_posix()
    if any(fnmatch.fnmatch(relative.name, pattern) for pattern in SECRET_NAMES):
        return True
    return any(posix == folder or posix.endswith("/" + folder) for folder in SECRET_DIRS)


def secret_in_content(path: Path) -> str | None:
    """Why the file's text looks like it holds a secret, or None."""
    with path.open("rb") as file:
        head = file.read(SCANNED_BYTES)
    for pattern, why in _CONTENT:
        if pattern.search(head):
            return why
    return None
