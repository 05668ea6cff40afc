"""Agent World Model's tool worlds (manifest kind "awm"), served in process.

- session.py: the adapter, one AwmSession per episode (reset copies the world's database, step calls a tool);
- worlds.py:  each world's FastAPI app, loaded once per worker and bound to the episode's database copy, its
              endpoints as tools called through ASGI in threads;
- verify.py:  the task's verifier in a child process with limits;
- judge.py:   SQL mode's LLM judge, over an OpenAI-compatible endpoint;
- parity.py:  AWM's own agent protocol (list_tools / call_tool, <tool_call> text).
"""
