"""Environments as data: what an `openenv.toml` declares (schema.py), where environments are found
(discovery.py: shipped ones and the user's imports, recorded in the home of home.py), and the virtual
environment each dependency set gets (venvs.py), and the LLM judge endpoint the user gives those that call one
(judge_endpoint.py)."""

from openenv_gym.manifests.discovery import all_manifests, find_manifest
from openenv_gym.manifests.schema import (
    MANIFEST_FILE,
    BaseManifest,
    ImportedManifest,
    ManifestError,
    OrsManifest,
    PythonManifest,
    VerifiersManifest,
    load_manifest,
)

__all__ = ["MANIFEST_FILE", "BaseManifest", "ImportedManifest", "ManifestError", "OrsManifest", "PythonManifest",
           "VerifiersManifest", "all_manifests", "find_manifest", "load_manifest"]
