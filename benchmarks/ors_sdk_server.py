"""Serve an ORS source under its own SDK's Server: python ors_sdk_server.py FOLDER MODULE:CLASS PORT.

Run with a python that has the SDK (the environment's venv). Used by the ORS benchmark and the tests
as the reference server; it puts FOLDER on sys.path as the source's author would run it.
"""

import importlib
import sys

folder, entry, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, folder)
module_name, class_name = entry.split(":")
env_class = getattr(importlib.import_module(module_name), class_name)
try:
    from openreward.environments import Server
except ImportError:
    from ors import Server
Server([env_class]).run(host="127.0.0.1", port=port)
