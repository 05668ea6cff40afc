"""What a Verifiers v1 environment's venv holds besides its own dependencies (the importer writes them, the adapter
counts on them).

Its harness programs (the null and bash harnesses' chat program, verifiers 0.4's harnesses/utils/launch.py) are
PEP 723 scripts that Verifiers would install with uv into an environment of their own, once per machine and from
the network; installed in the env's venv, they run there instead, forked warm (adapters/verifiers/warm_programs.py).
"""

VERIFIERS_V1 = "verifiers>=0.4,<0.5"
CHAT_PROGRAM_DEPENDENCIES = ["openai", "mcp==2.0.0", "httpx", "httpx2", "tenacity", "certifi"]
