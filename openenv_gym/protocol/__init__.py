"""Wire formats, sans I/O: message shapes, encoding and validation, and no sockets.

- native.py: openenv_gym's own multiplexed protocol (docs/protocol.md);
- ors.py:    the JSON shapes of ORS servers and environments (blocks, tools, tool results, splits);
- outbox.py: messages queued in one event-loop iteration leave as one frame;
- ready.py:  how a server process tells whoever started it that it is ready, and where;
- dialects.py: the APIs the intercepting model endpoint speaks, one module each: openai_chat.py (chat completions),
  openai_responses.py (Responses), anthropic_messages.py (Messages), gemini.py (generateContent).

A new wire format gets a module here; its server front end goes in server/ and its client transport in
client/ (see docs/architecture.md).
"""
