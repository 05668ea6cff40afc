"""Agent programs as environments (manifest kind "agent"), stepped through the intercepting model endpoint.

Real parts only: a real server, real programs (the shipped curl one-liner and openai-package agent, and programs
written here), the real `openai` client inside them, and the endpoint hit over loopback HTTP.
"""

import asyncio
import json
import textwrap
from pathlib import Path

import gymnasium as gym
import httpx
import pytest
from conftest import ROOT, scrape, wait_until, write_files
from conftest import play_episode as play
from tool_shape import names_of

import openenv_gym
from openenv_gym.errors import EnvError

SERVERS = ROOT / "servers"


def agent_env(folder: Path, program: str, *, manifest: str = "", tasks: list[dict] | None = None,
              reward: str | None = None) -> str:
    """An agent env folder running `program` (Python, stdlib and openai only) as `python agent.py PROMPT`."""
    files = {"agent.py": program,
             "tasks.jsonl": "\n".join(json.dumps(t) for t in tasks or [{"prompt": "hello", "answer": "hi"}])}
    if reward:
        files["reward.py"] = reward
    head = f'name = "{folder.name}"\nkind = "agent"\ntasks = "tasks.jsonl"\n'
    if "command" not in manifest and "entry" not in manifest:
        head += 'command = ["python", "agent.py"]\n'
    write_files(folder, {**files, "openenv.toml": head + textwrap.dedent(manifest)})
    return str(folder)


# -- the shipped examples --------------------------------------------------------------------------------

def test_the_curl_one_liner_is_an_environment(start_server):
    url = start_server(str(SERVERS / "curl_agent"))
    (obs, info), (end, reward, terminated, truncated, end_info) = play(url, ["It is Rome."], {"index": 2})
    assert obs == "What is the capital of Italy?"
    assert info["messages"] == [{"role": "user", "content": "What is the capital of Italy?"}] and info["tools"] == []
    assert (reward, terminated, truncated, end_info["exit_code"]) == (1.0, True, False, 0)
    # what curl printed last is the completion our endpoint answered with
    assert end_info["result"]["choices"][0]["message"]["content"] == "It is Rome."
    [_, (_, reward, *_)] = play(url, ["Paris, surely."], {"index": 2})
    assert reward == 0.0
    # a policy that samples tokens sends them with its message: the program gets them where vLLM puts them
    sampled = {"content": "Rome", "completion_ids": [11, 12], "logprobs": [-0.5, -0.25]}
    [_, (_, reward, _, _, info)] = play(url, [sampled], {"index": 2})
    choice = info["result"]["choices"][0]
    assert reward == 1.0 and choice["token_ids"] == [11, 12]
    assert [entry["logprob"] for entry in choice["logprobs"]["content"]] == [-0.5, -0.25]
    # GET /metrics: three programs called the model endpoint once each; their sandboxes closed after their episodes
    # (kept a moment, warm, for the next), and an episode under way holds one (and one is made ready for the next)
    assert wait_until(lambda: scrape(url)[("openenv_gym_sandboxes", ())] == 0.0)
    assert scrape(url)[("openenv_gym_model_requests_total", (("dialect", "chat"),))] == 3.0
    env = gym.make("openenv/remote", base_url=url)
    env.reset(options={"index": 2})
    assert scrape(url)[("openenv_gym_sandboxes", ())] >= 1.0
    env.close()
    assert wait_until(lambda: scrape(url)[("openenv_gym_sandboxes", ())] == 0.0)


def test_a_programs_next_request_shows_its_tools_in_the_one_shape_in_a_batch_too(start_server):
    """A step's info carries the program's next request, tools included (ChatRequest.info puts them in the one
    shape, wherever the step is answered): stepped in a batch (make_vec's `steps`) as one at a time."""
    url = start_server(str(SERVERS / "calc_agent"))
    envs = gym.make_vec("openenv/remote", num_envs=2, base_url=url)
    envs.reset(options={"index": 0})
    _, _, terminated, _, infos = envs.step([{"name": "calculate", "arguments": {"expression": "17*23"}}] * 2)
    assert not terminated.any() and [names_of(tools) for tools in infos["tools"]] == [["calculate"]] * 2
    envs.close()


def test_the_openai_agent_calls_its_tool_and_is_scored_by_its_trace(start_server):
    url = start_server(str(SERVERS / "calc_agent"))
    first, tool_turn, last = play(url, [{"name": "calculate", "arguments": {"expression": "17*23"}}, "391"],
                                  {"index": 0})
    obs, info = first
    assert obs == "What is 17 * 23?" and info["messages"][0]["role"] == "system"
    assert names_of(info["tools"]) == ["calculate"]
    assert tool_turn[0] == "391" and tool_turn[1:4] == (0.0, False, False)  # the tool's answer, as the program sent it
    assert tool_turn[4]["messages"][-1]["role"] == "tool" and names_of(tool_turn[4]["tools"]) == ["calculate"]
    assert last[1:4] == (1.0, True, False)
    assert last[4]["result"] == {"answer": "391"} and last[4]["metrics"] == {"tool_calls": 1}
    [_, (_, reward, terminated, _, info)] = play(url, ["400"], {"index": 0})
    assert (reward, terminated, info["metrics"]) == (0.0, True, {"tool_calls": 0})


# -- programs of every shape -----------------------------------------------------------------------------

STREAMING = '''
    import json, os, sys
    from openai import OpenAI

    client = OpenAI()
    tools = [{"type": "function", "function": {"name": "look", "parameters": {"type": "object", "properties": {}}}}]
    stream = client.chat.completions.create(model=os.environ["OPENAI_MODEL"], stream=True, tools=tools,
                                            stream_options={"include_usage": True},
                                            messages=[{"role": "user", "content": sys.argv[1]}])
    text, calls, usage = "", [], None
    for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            text += choice.delta.content or ""
            calls += [call.function.name for call in choice.delta.tool_calls or ()]
    print(json.dumps({"reward": 0.5, "text": text, "calls": calls, "usage": usage is not None}))
'''


def test_a_streaming_program_gets_server_sent_events_with_tool_calls_and_usage(tmp_path, start_server):
    url = start_server(agent_env(tmp_path / "streaming", STREAMING))
    _, (_, reward, terminated, _, info) = play(url, [{"content": "let me look", "tool_calls": [
        {"type": "function", "function": {"name": "look", "arguments": "{}"}}]}])
    assert (reward, terminated) == (0.5, True)
    assert info["metrics"] == {"text": "let me look", "calls": ["look"], "usage": True}


ENTRY = '''
    import httpx

    async def run(prompt, base_url, api_key, model):
        async with httpx.AsyncClient() as client:
            for turn in range(2):
                body = {"model": model, "messages": [{"role": "user", "content": f"{prompt} {turn}"}]}
                answer = await client.post(f"{base_url}/chat/completions", json=body,
                                           headers={"Authorization": f"Bearer {api_key}"})
                answer.raise_for_status()
        return {"reward": len(answer.json()["choices"][0]["message"]["content"]), "turns": 2}
'''


def test_a_python_function_is_an_agent_too(tmp_path, start_server):
    url = start_server(agent_env(tmp_path / "entry", ENTRY, manifest='entry = "agent:run"\npreload = ["httpx"]\n'))
    answers = play(url, ["one", "three"])
    assert [a[0] for a in answers[:2]] == ["hello 0", "hello 1"]
    assert answers[-1][1:4] == (5.0, True, False) and answers[-1][4]["metrics"] == {"turns": 2}


def test_tasks_come_from_the_reset_and_answers_stay_hidden(tmp_path, start_server):
    asker = '''
        import json, os, sys, urllib.request
        body = json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": [{"role": "user", "content": sys.argv[1]}]})
        request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body.encode(),
                                         {"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                          "Content-Type": "application/json"})
        urllib.request.urlopen(request).read()
        print(json.dumps({"reward": 1.0, "task": json.loads(os.environ["OPENENV_TASK"])}))
    '''
    url = start_server(agent_env(tmp_path / "tasks", asker, tasks=[{"prompt": "p0", "answer": "a0"},
                                                                   {"id": "second", "prompt": "p1", "answer": "a1"}]))
    (obs, info), (*_, end) = play(url, ["ok"], {"split": "train", "index": 1})
    assert obs == "p1" and "task" not in info
    assert end["metrics"]["task"] == {"id": "second", "prompt": "p1"}  # the program never sees the answer
    # the one vocabulary: task by index or id (a task chosen at random once, whatever it said), a seed's own choice
    assert [play(url, ["ok"], {"task": task})[0][0] for task in (1, "second", 0)] == ["p1", "p1", "p0"]
    assert len({play(url, ["ok"], seed=5)[0][0] for _ in range(3)}) == 1
    for options, message in (({"level": 2}, "does not understand the reset option 'level'; it understands: "
                                            "env_seconds, episode_id, expose_answer, expose_task, group, index, "
                                            "max_steps, split, task, task_spec"),
                             ({"task": "third"}, "no task of split 'train' has the id or name 'third'"),
                             ({"task": 2}, "task 2 is out of range"), ({"seed": 5}, "reset's own argument")):
        with pytest.raises(openenv_gym.BadRequestError, match=message):
            play(url, ["ok"], options)
    (obs, info), _ = play(url, ["ok"], {"task_spec": {"prompt": "given"}})
    assert obs == "given"
    (obs, info), _ = play(url, ["ok"], {"index": 0, "expose_answer": True})
    assert info["task"] == {"prompt": "p0", "answer": "a0"}


def test_the_reward_function_sees_the_whole_trace(tmp_path, start_server):
    """The answer the program never saw, each request and reply (a sampled reply's tokens too), and the result."""
    reward = '''
        def score(trace):
            reply = trace["turns"][0]["reply"]
            return {"reward": float(trace["result"]["said"] == trace["task"]["answer"]),
                    "asked": trace["turns"][0]["messages"][-1]["content"], "ids": reply.get("completion_ids"),
                    "logprobs": reply.get("logprobs"), "exit_code": trace["exit_code"]}
    '''
    program = ASK_ONCE + '    print(json.dumps({"said": "a0"}))\n'
    url = start_server(agent_env(tmp_path / "traced", program, manifest='reward = "reward:score"\n',
                                 tasks=[{"prompt": "p0", "answer": "a0"}], reward=reward))
    [_, (_, reward_value, terminated, _, info)] = play(url, [{"content": "x", "completion_ids": [5, 6],
                                                             "logprobs": [-1.0, -2.0]}])
    assert (reward_value, terminated) == (1.0, True)
    assert info["metrics"] == {"asked": "p0", "ids": [5, 6], "logprobs": [-1.0, -2.0], "exit_code": 0}


# -- bad programs and bad input end only their own episode ----------------------------------------------

NEVER_ASKS = 'import sys; print("no model needed", file=sys.stderr); sys.exit(3)'
ASK_ONCE = '''
    import json, os, sys, time, urllib.request
    body = json.dumps({"messages": [{"role": "user", "content": sys.argv[1]}]}).encode()
    urllib.request.urlopen(urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body))
'''
WELL = 'print(json.dumps({"reward": 1.0}))'
BADLY = {  # what a program asked to misbehave does after its first answer
    "crashes": 'raise RuntimeError("the agent broke")',
    "hangs": "time.sleep(3600)",
    "floods": 'while True:\n            sys.stdout.write("x" * 65536)',
}
CRASHES = ASK_ONCE + "    " + BADLY["crashes"] + "\n"


def misbehaving(how: str) -> str:
    return ASK_ONCE + f'    if sys.argv[1] == "misbehave":\n        {BADLY[how]}\n    {WELL}\n'


MISBEHAVES = '''
    import json, os, sys, urllib.error, urllib.request
    base, key = os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    root = base.rsplit("/", 2)[0]  # http://127.0.0.1:PORT

    def post(url, body, token=None):
        headers = {"Content-Type": "application/json", **({"Authorization": "Bearer " + token} if token else {})}
        try:
            with urllib.request.urlopen(urllib.request.Request(url, body, headers)) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())["error"]["code"]

    good = json.dumps({"model": os.environ["OPENAI_MODEL"], "messages": [{"role": "user", "content": "q"}]}).encode()
    seen = {
        "not_json": post(base + "/chat/completions", b"{not json"),
        "no_messages": post(base + "/chat/completions", b'{"messages": []}'),
        "other_model": post(base + "/chat/completions", json.dumps({"model": "gpt-9", "messages": [
            {"role": "user", "content": "q"}]}).encode()),
        "guessed_key": post(root + "/v1/chat/completions", good, "sk-guess"),
        "altered_key": post(root + "/" + key[:-1] + ("A" if key[-1] != "A" else "B") + "/v1/chat/completions", good),
        "no_key": post(root + "/v1/chat/completions", good),
    }
    status, answer = post(base + "/chat/completions", good)
    seen["good"] = [status, answer["choices"][0]["message"]["content"]]
    print(json.dumps({"reward": 1.0, **seen}))
'''


def test_a_program_that_never_asks_fails_the_reset_with_what_it_said(tmp_path, start_server):
    url = start_server(agent_env(tmp_path / "silent", NEVER_ASKS))
    with pytest.raises(EnvError, match=r"exit code 3\) before asking the model anything(.|\n)*no model needed"):
        play(url, [])


def test_crashes_hangs_and_floods_end_only_their_own_episode(tmp_path, start_server):
    manifests = {"crashes": "", "hangs": "limits = {turn_timeout = 1.0}\n", "floods": "limits = {output_mb = 1}\n"}
    tasks = [{"prompt": "behave"}, {"prompt": "misbehave"}]
    for how in BADLY:
        url = start_server(agent_env(tmp_path / how, misbehaving(how), manifest=manifests[how], tasks=tasks))

        async def main(url=url):
            async with openenv_gym.connect(url) as conn:
                victim, bystander = conn.session(), conn.session()
                await victim.reset(options={"index": 1})
                await bystander.reset(options={"index": 0})
                ended = await victim.step("answer")
                assert (await bystander.step("fine"))[1:4] == (1.0, True, False)  # its program ran on, and ended well
                assert (await victim.reset(options={"index": 0}))[0] == "behave"  # the session plays on
                return ended
        obs, reward, terminated, truncated, info = asyncio.run(main())
        if how == "crashes":
            assert (terminated, truncated, info["exit_code"]) == (True, False, 1)
            assert "RuntimeError: the agent broke" in info["error"]["message"]
        elif how == "hangs":
            assert (terminated, truncated, info["error"]["code"]) == (False, True, "timeout")
        else:  # its file size limit: Python's write fails (CPython ignores SIGXFSZ), and the program exits
            assert terminated and info["exit_code"] == 1 and "File too large" in info["error"]["message"]


def test_bad_requests_get_openai_errors_and_no_key_reaches_another_session(tmp_path, start_server):
    url = start_server(agent_env(tmp_path / "misbehaves", MISBEHAVES))
    (obs, _), (_, reward, terminated, _, info) = play(url, ["the answer"])
    assert obs == "q" and (reward, terminated) == (1.0, True)
    metrics = info["metrics"]
    assert metrics["not_json"] == [400, "invalid_json"] and metrics["no_messages"] == [400, "invalid_request"]
    assert metrics["other_model"] == [404, "model_not_found"]
    assert metrics["guessed_key"] == metrics["altered_key"] == metrics["no_key"] == [401, "invalid_api_key"]
    assert metrics["good"] == [200, "the answer"]
    assert len(info["endpoint_errors"]) == 3 and "gpt-9" in info["endpoint_errors"][2]


def test_an_action_that_is_no_message_is_an_invalid_action_and_the_program_waits(tmp_path, start_server):
    url = start_server(agent_env(tmp_path / "waits", CRASHES))
    (_, _), bad, end = play(url, [{"oops": 1}, "now a real answer"])
    assert bad[1:4] == (0.0, False, False) and bad[4]["error"]["code"] == "invalid_action"
    assert end[2] and "the agent broke" in end[4]["error"]["message"]


def test_a_request_after_the_episode_ended_is_told_so(tmp_path, start_server):
    """Unconfined (--no-sandbox), a program's address on the worker's endpoint outlives its episode: a late request
    is answered 410. (Sandboxed, the address is in the sandbox's own network, gone with it.)"""
    leak = tmp_path / "leaked.json"
    program = f'''
        import json, os, urllib.request
        open({str(leak)!r}, "w").write(json.dumps([os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]]))
        body = json.dumps({{"messages": [{{"role": "user", "content": "q"}}]}}).encode()
        urllib.request.urlopen(urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", body))
    '''
    url = start_server(agent_env(tmp_path / "late", program), "--no-sandbox")
    play(url, ["done"])
    base_url, key = json.loads(leak.read_text())
    late = httpx.post(base_url + "/chat/completions", json={"messages": [{"role": "user", "content": "again"}]})
    assert late.status_code == 410 and late.json()["error"]["code"] == "episode_ended"


def test_many_sessions_run_their_programs_at_once(start_server):
    url = start_server(str(SERVERS / "curl_agent"), workers=2)  # each worker its own fork server and endpoint

    async def main():
        async with openenv_gym.connect(url) as conn:
            sessions = [conn.session() for _ in range(48)]
            resets = await asyncio.gather(*(s.reset(options={"index": k % 3}) for k, s in enumerate(sessions)))
            answers = ["bonjour", "blue", "rome"]
            steps = await asyncio.gather(*(s.step(answers[k % 3]) for k, s in enumerate(sessions)))
            await asyncio.gather(*(s.close() for s in sessions))
            return resets, steps
    resets, steps = asyncio.run(main())
    assert [obs for obs, _ in resets[:3]] == ['Say "bonjour", the French for hello.',
                                              "Name the colour of a clear daytime sky.",
                                              "What is the capital of Italy?"]
    assert all(step[1:3] == (1.0, True) for step in steps)
