"""Run an ORS source's environment under the SDK's own Server: python ors_server.py FOLDER MODULE:CLASS PORT.

Started by the tests with the python of the environment's venv (which has the SDK).
"""

import importlib
import sys

folder, entry, port = sys.argv[1], sys.argv[2], int(sys.argv[3])
sys.path.insert(0, folder)  # a test helper running the source as its author would; the project never does this
module_name, class_name = entry.split(":")
env_class = getattr(importlib.import_module(module_name), class_name)
try:
    from openreward.environments import Server
except ImportError:
    from ors import Server
Server([env_class]).run(host="127.0.0.1", port=port)
