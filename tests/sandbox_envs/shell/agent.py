"""A shell agent, as a bash harness is one: each model reply is run as a shell command in the working directory,
and what it printed (with its exit code) is the next user message; the reply `exit` ends the episode. The
commands are a policy's, so anything at all: the sandbox's tests send the worst."""

import json
import os
import subprocess
import sys
import urllib.request

URL, KEY, MODEL = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"], os.environ["OPENAI_MODEL"]


def ask(messages: list[dict]) -> str:
    body = json.dumps({"model": MODEL, "messages": messages}).encode()
    request = urllib.request.Request(f"{URL}/chat/completions", body, {"Authorization": f"Bearer {KEY}",
                                                                      "Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=600) as response:
        return json.load(response)["choices"][0]["message"]["content"] or ""


messages = [{"role": "user", "content": sys.argv[1]}]
commands = 0
while (command := ask(messages)).strip() != "exit":
    commands += 1
    messages.append({"role": "assistant", "content": command})
    try:
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=20)
        said = f"exit {done.returncode}\n{done.stdout}{done.stderr}"
    except subprocess.TimeoutExpired:
        said = "timed out"
    messages.append({"role": "user", "content": said[-8000:]})
print(json.dumps({"reward": 1.0, "commands": commands}))
