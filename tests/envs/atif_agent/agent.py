"""A small agent that keeps an ATIF trajectory: two calls of its own around a sub-agent's, a step copied from an
earlier run and a dispatch without a model call. Told {"miscount": true}, it counts completion tokens by words; told
{"link": PATH}, it leaves a symbolic link to PATH where its trajectory goes instead."""
import json
import os
from datetime import UTC, datetime

from openai import OpenAI

client, model = OpenAI(), os.environ["OPENAI_MODEL"]
task, prompt = json.loads(os.environ["OPENENV_TASK"]), os.environ["OPENENV_PROMPT"]


def now():
    return datetime.now(UTC).isoformat()


def call(messages, steps):
    answer = client.chat.completions.create(model=model, messages=messages)
    text = answer.choices[0].message.content or ""
    used = answer.usage.completion_tokens if not task.get("miscount") else len(text.split())
    steps.append({"step_id": len(steps) + 1, "source": "agent", "timestamp": now(), "message": text,
                  "llm_call_count": 1, "metrics": {"prompt_tokens": answer.usage.prompt_tokens,
                                                   "completion_tokens": used}})
    return text


main = [{"step_id": 1, "source": "agent", "message": "an answer from before", "is_copied_context": True,
         "metrics": {"prompt_tokens": 5, "completion_tokens": 3}},
        {"step_id": 2, "source": "user", "message": prompt, "timestamp": now()}]
helper = []
messages = [{"role": "system", "content": "You are the main agent."}, {"role": "user", "content": prompt}]
first = call(messages, main)
main.append({"step_id": len(main) + 1, "source": "agent", "timestamp": now(), "message": "ask the helper",
             "llm_call_count": 0})
said = call([{"role": "system", "content": "You are a helper."}, {"role": "user", "content": first}], helper)
messages += [{"role": "assistant", "content": first}, {"role": "user", "content": "The helper says: " + said}]
call(messages, main)
trajectory = {"schema_version": "ATIF-v1.7", "session_id": "main", "agent": {"name": "tiny", "version": "1"},
              "steps": main, "subagent_trajectories": [
                  {"schema_version": "ATIF-v1.7", "session_id": "helper", "trajectory_id": "helper",
                   "agent": {"name": "tiny-helper", "version": "1"}, "steps": helper}]}
path = os.environ["OPENENV_TRAJECTORY"]
os.makedirs(os.path.dirname(path), exist_ok=True)
if task.get("link"):
    os.symlink(task["link"], path)
else:
    with open(path, "w") as file:
        json.dump(trajectory, file)
print(json.dumps({"reward": 1.0, "trajectory": trajectory}))  # (for the test to check with Harbor's model)
