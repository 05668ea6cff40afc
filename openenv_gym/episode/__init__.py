"""What an episode is, whoever runs it: the server's session core, an adapter, or a client transport that
runs the episode itself (ORS over HTTP). Each rule is written here once:

- results.py: what a reset and a step return; the invalid-action observation; reward None -> 0.0;
- state.py: no auto-reset, the step limit and truncation, which errors end a session;
- tasks.py: which task a reset plays, and keeping answers out of sight unless asked for;
- toolcalls.py: the tool call an action makes (an object, or model text holding one).
"""
