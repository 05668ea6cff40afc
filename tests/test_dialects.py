"""The model endpoint in each API agents speak: OpenAI Responses, Anthropic Messages and Gemini, besides chat
completions. Each is played by a program with that API's own client package (`openai`, `anthropic`,
`google-genai`), streamed and not, through a real server on loopback; the session sees one shape of messages and
tools whatever the program speaks, and the program gets the policy's answer in its own API: a thinking model's
reasoning too, which the program's client reads where its API puts it and sends back, and the session sees again.
"""

import json

import pytest
from conftest import play_episode as play
from test_agent_env import agent_env
from tool_shape import names_of

CLIENTS = ["responses", "responses_stream", "anthropic", "anthropic_stream", "gemini", "gemini_stream", "chat",
           "chat_stream"]

PROGRAM = '''
    import json, os, sys

    task = json.loads(os.environ["OPENENV_TASK"])
    client_name, prompt, model = task["client"], sys.argv[1], os.environ["OPENAI_MODEL"]
    stream = client_name.endswith("_stream")
    schema = {"type": "object", "properties": {"what": {"type": "string"}}, "required": ["what"]}

    if client_name.startswith("responses"):
        from openai import OpenAI

        client = OpenAI()
        tools = [{"type": "function", "name": "look", "description": "Look at something.", "parameters": schema},
                 {"type": "web_search"}]  # (a hosted tool, as Codex sends: tolerated, not offered)

        def ask(items, previous=None):
            extra = {"previous_response_id": previous} if previous else {}
            if not stream:
                return client.responses.create(model=model, input=items, tools=tools, instructions="Be brief.",
                                               **extra)
            events = list(client.responses.create(model=model, input=items, tools=tools, instructions="Be brief.",
                                                  stream=True, **extra))
            assert [e.sequence_number for e in events] == list(range(len(events)))
            return next(e.response for e in events if e.type == "response.completed")

        items = [{"role": "user", "content": prompt}]
        first = ask(items)
        call = next(item for item in first.output if item.type == "function_call")
        thought = next(item for item in first.output if item.type == "reasoning")
        reasoning, signature = thought.summary[0].text, None
        answer = {"type": "function_call_output", "call_id": call.call_id, "output": "42"}
        # streamed: the whole input again; plain: only the new item, going on from the first response by its id
        second = ask([*items, *[item.model_dump() for item in first.output], answer]) if stream \\
            else ask([answer], first.id)
        text, arguments = second.output_text, json.loads(call.arguments)
        sampled = (second.output[0].model_extra or {}).get("generation_token_ids")
        usage = [second.usage.input_tokens, second.usage.output_tokens]

    elif client_name.startswith("anthropic"):
        from anthropic import Anthropic

        client = Anthropic()
        tools = [{"name": "look", "description": "Look at something.", "input_schema": schema},
                 {"type": "web_search_20250305", "name": "web_search"}]

        def ask(messages):
            common = dict(model=model, max_tokens=256, system=[{"type": "text", "text": "Be brief.",
                                                                 "cache_control": {"type": "ephemeral"}}],
                          messages=messages, tools=tools)
            if not stream:
                return client.messages.create(**common)
            with client.messages.stream(**common) as events:
                return events.get_final_message()

        messages = [{"role": "user", "content": prompt}]
        first = ask(messages)
        use = next(block for block in first.content if block.type == "tool_use")
        thought = next(block for block in first.content if block.type == "thinking")
        reasoning, signature = thought.thinking, thought.signature
        messages += [{"role": "assistant", "content": [block.model_dump(exclude_none=True) for block in first.content]},
                     {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "42"}]}]
        second = ask(messages)
        text, arguments = "".join(b.text for b in second.content if b.type == "text"), use.input
        sampled = None  # (the Messages API has no place for them)
        usage = [second.usage.input_tokens, second.usage.output_tokens]

    elif client_name.startswith("chat"):
        from openai import OpenAI

        client = OpenAI()
        tools = [{"type": "function", "function": {"name": "look", "description": "Look at something.",
                                                   "parameters": schema}}]

        used = {}

        def ask(messages):
            common = dict(model=model, messages=[{"role": "system", "content": "Be brief."}, *messages], tools=tools)
            if not stream:
                completion = client.chat.completions.create(**common)
                used["usage"], message = completion.usage, completion.choices[0].message
                return message.model_dump(exclude_none=True) | (message.model_extra or {})
            message = {"role": "assistant", "content": "", "reasoning_content": ""}
            for chunk in client.chat.completions.create(**common, stream=True, stream_options={"include_usage": True}):
                used["usage"] = chunk.usage or used.get("usage")
                delta = chunk.choices[0].delta if chunk.choices else None
                extra = (delta.model_extra or {}) if delta else {}
                message["content"] += (delta.content or "") if delta else ""
                message["reasoning_content"] += extra.get("reasoning_content") or ""
                for call in (delta.tool_calls or []) if delta else []:
                    message.setdefault("tool_calls", []).append(call.model_dump(exclude_none=True))
            return message

        messages = [{"role": "user", "content": prompt}]
        first = ask(messages)
        call = first["tool_calls"][0]
        reasoning, signature = first["reasoning_content"], None
        messages += [first, {"role": "tool", "tool_call_id": call["id"], "content": "42"}]
        second = ask(messages)
        text, arguments, sampled = second["content"], json.loads(call["function"]["arguments"]), None
        usage = [used["usage"].prompt_tokens, used["usage"].completion_tokens]

    else:
        from google import genai
        from google.genai import types

        client = genai.Client(api_key=os.environ["GEMINI_API_KEY"],
                              http_options=types.HttpOptions(base_url=os.environ["GOOGLE_GEMINI_BASE_URL"]))
        config = types.GenerateContentConfig(
            system_instruction="Be brief.",
            tools=[types.Tool(function_declarations=[types.FunctionDeclaration(
                name="look", description="Look at something.", parameters_json_schema=schema)])],
            automatic_function_calling=types.AutomaticFunctionCallingConfig(disable=True))

        def ask(contents):
            if not stream:
                return client.models.generate_content(model=model, contents=contents, config=config)
            return list(client.models.generate_content_stream(model=model, contents=contents, config=config))[-1]

        contents = [types.Content(role="user", parts=[types.Part(text=prompt)])]
        first = ask(contents)
        call = first.function_calls[0]
        reasoning, signature = "".join(p.text for p in first.candidates[0].content.parts if p.thought), None
        contents += [first.candidates[0].content, types.Content(role="user", parts=[types.Part(
            function_response=types.FunctionResponse(id=call.id, name=call.name, response={"output": "42"}))])]
        second = ask(contents)
        text, arguments = second.text, call.args
        chosen = second.candidates[0].logprobs_result
        sampled = [candidate.token_id for candidate in chosen.chosen_candidates] if chosen else None
        usage = [second.usage_metadata.prompt_token_count, second.usage_metadata.candidates_token_count]

    print(json.dumps({"reward": float(text == "done"), "arguments": arguments, "sampled": sampled,
                      "reasoning": reasoning, "signature": signature, "usage": usage}))
'''


@pytest.fixture(scope="module")
def dialects_url(tmp_path_factory):
    from openenv_gym.client.local import LocalServer

    folder = tmp_path_factory.mktemp("envs") / "dialects"
    tasks = [{"prompt": f"Look at the {client}.", "client": client} for client in CLIENTS]
    server = LocalServer(agent_env(folder, PROGRAM, tasks=tasks), 1, 100)
    yield server.url
    server.stop()


THOUGHT = "The sky may tell.\nLook first."


@pytest.mark.parametrize("client", CLIENTS)
def test_each_api_plays_through_its_own_client_and_the_session_sees_one_shape(dialects_url, client):
    look = {"reasoning_content": THOUGHT, "tool_calls": [{"name": "look", "arguments": {"what": "sky"}}]}
    done = {"content": "done", "completion_ids": [7, 8], "logprobs": [-0.5, -0.25], "prompt_tokens": 31}
    (obs, info), called, last = play(dialects_url, [look, done], {"index": CLIENTS.index(client)})
    dialect = client.removesuffix("_stream")
    assert obs == f"Look at the {client}." and info["dialect"] == dialect
    assert info["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": f"Look at the {client}."}]
    assert names_of(info["tools"]) == ["look"]  # (hosted tools are not offered)
    assert info["tools"][0]["parameters"]["required"] == ["what"]
    obs, reward, terminated, _, info = called
    assert (obs, reward, terminated) == ("42", 0.0, False)
    call, answer = info["messages"][-2:]
    assert call["role"] == "assistant" and call["tool_calls"][0]["function"]["name"] == "look"
    # the reasoning came back with the call, as the program's client sent it (an Anthropic signature as it came),
    # and the request goes on from the first: the turn graph links turns whether their reasoning is sent back or not
    assert call["reasoning_content"] == THOUGHT and info["turn"]["kind"] == "continues"
    assert json.loads(call["tool_calls"][0]["function"]["arguments"]) == {"what": "sky"}
    assert answer == {"role": "tool", "tool_call_id": call["tool_calls"][0]["id"], "content": "42"}
    _, reward, terminated, _, info = last
    assert (reward, terminated, info.get("endpoint_errors")) == (1.0, True, None), info
    assert info["result"]["arguments"] == {"what": "sky"}
    assert info["result"]["sampled"] == (None if dialect in ("anthropic", "chat") else [7, 8])
    assert info["result"]["usage"] == [31, 2]  # the policy's counts, in the usage its API reports
    assert info["result"]["reasoning"] == THOUGHT  # (read by the program's own client, where its API puts it)
    assert (info["result"]["signature"] is not None) == (dialect == "anthropic")
    assert call.get("reasoning_signature") == info["result"]["signature"]  # (kept as the client sent it back)


BAD_REQUESTS = '''
    import json, os, urllib.error, urllib.request

    root = os.environ["ANTHROPIC_BASE_URL"].rsplit("/", 1)[0]  # (the key goes in a header, as clients send it)
    key = os.environ["OPENAI_API_KEY"]

    def post(path, body, headers):
        request = urllib.request.Request(root + path, data=json.dumps(body).encode(), method="POST",
                                         headers={"content-type": "application/json", **headers})
        try:
            with urllib.request.urlopen(request) as answer:
                return answer.status, json.loads(answer.read())
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read())

    anthropic = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    said = {
        "unknown block": post("/v1/messages", {"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": [{"type": "hologram"}]}]}, anthropic),
        "result of no call": post("/v1/messages?beta=true", {"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_never", "content": "x"}]}]},
            anthropic),
        "a Responses body on the Messages path": post("/v1/messages", {"model": "m", "input": "hi"}, anthropic),
        "unknown part": post("/v1beta/models/m:generateContent", {"contents": [{"role": "user", "parts": [
            {"hologram": {}}]}]}, {"x-goog-api-key": key}),
        "unknown item": post("/v1/responses", {"model": "m", "input": [{"type": "hologram"}]},
                             {"authorization": f"Bearer {key}"}),
        "response of no call": post("/v1beta/models/m:generateContent", {"contents": [{"role": "user", "parts": [
            {"functionResponse": {"name": "look", "response": {"output": "x"}}}]}]}, {"x-goog-api-key": key}),
        "output of no call": post("/v1/responses", {"model": "m", "input": [
            {"type": "function_call_output", "call_id": "call_never", "output": "x"}]},
            {"authorization": f"Bearer {key}"}),
        "unknown previous response": post("/v1/responses", {"model": "m", "input": "hi",
                                                            "previous_response_id": "resp_never"},
                                          {"authorization": f"Bearer {key}"}),
        "not served": post("/v1/embeddings", {"input": "hi"}, {"authorization": f"Bearer {key}"}),
        "a wrong key": post("/v1beta/models/m:generateContent", {"contents": []}, {"x-goog-api-key": "wrong"}),
        "count": post("/v1/messages/count_tokens", {"model": "m", "messages": [{"role": "user", "content": "hi"}]},
                      anthropic),
        "gemini count": post("/v1beta/models/m:countTokens", {"contents": [{"parts": [{"text": "hi"}]}]},
                             {"x-goog-api-key": key}),
    }
    try:  # (more than the 32 MiB a request may have)
        said["oversized"] = post("/v1/messages", {"model": "m", "max_tokens": 5, "messages": [
            {"role": "user", "content": "x" * (33 << 20)}]}, anthropic)
    except OSError as error:  # (the server may close before the whole body was sent)
        said["oversized"] = [type(error).__name__, {}]
    # then a turn, asking for a model of its own (as Claude Code does): answered as the served one
    status, reply = post("/v1/messages", {"model": "claude-of-its-own", "max_tokens": 5,
                                          "messages": [{"role": "user", "content": "hi"}]}, anthropic)
    print(json.dumps({"reward": 1.0, "said": said, "reply": reply}))
'''


def test_bad_requests_hear_clear_errors_in_their_own_apis_shape_and_the_episode_goes_on(tmp_path):
    from openenv_gym.client.local import LocalServer

    with LocalServer(agent_env(tmp_path / "bad", BAD_REQUESTS, manifest='model = "policy"\n'), 1, 10) as server:
        [(obs, info), (_, reward, terminated, _, end)] = play(server.url, ["hello"], {"index": 0})
    assert (obs, info["dialect"], reward, terminated) == ("hi", "anthropic", 1.0, True)
    said = end["result"]["said"]
    for case in ("unknown block", "result of no call", "a Responses body on the Messages path"):
        status, body = said[case]
        assert status == 400 and body["type"] == "error" and body["error"]["type"] == "invalid_request_error", case
    assert "hologram" in said["unknown block"][1]["error"]["message"]
    assert "toolu_never" in said["result of no call"][1]["error"]["message"]
    assert said["unknown part"][0] == 400 and said["unknown part"][1]["error"]["status"] == "INVALID_ARGUMENT"
    assert said["unknown item"][0] == 400 and said["unknown item"][1]["error"]["param"] == "input[0]"
    assert said["response of no call"][0] == 400 and "'look'" in said["response of no call"][1]["error"]["message"]
    assert said["output of no call"][0] == 400 and "call_never" in said["output of no call"][1]["error"]["message"]
    assert said["unknown previous response"][0] == 404 and "resp_never" in said["unknown previous response"][1][
        "error"]["message"]
    assert said["not served"][0] == 404 and "/v1/responses" in said["not served"][1]["error"]["message"]
    assert said["a wrong key"][0] == 401 and said["a wrong key"][1]["error"]["status"] == "UNAUTHENTICATED"
    assert said["oversized"][0] == 413 and said["oversized"][1]["error"]["type"] == "request_too_large", \
        said["oversized"]
    assert said["count"][0] == 200 and said["count"][1]["input_tokens"] > 0
    assert said["gemini count"][0] == 200 and said["gemini count"][1]["totalTokens"] > 0
    assert end["result"]["reply"]["model"] == "policy" and end["result"]["reply"]["content"] == [
        {"type": "text", "text": "hello"}]
    assert len(end["endpoint_errors"]) == 10  # (each refusal, said to the trainer too; the counts are no turns)


BRANCHES = '''
    import json, os, urllib.request

    root, key = os.environ["ANTHROPIC_BASE_URL"], os.environ["OPENAI_API_KEY"]

    def chat(messages):
        request = urllib.request.Request(root + "/v1/chat/completions", method="POST", data=json.dumps(
            {"messages": messages}).encode(), headers={"content-type": "application/json"})
        return json.loads(urllib.request.urlopen(request).read())["choices"][0]["message"]["content"]

    def anthropic(system, messages):
        request = urllib.request.Request(root + "/v1/messages", method="POST", data=json.dumps(
            {"model": "m", "max_tokens": 9, "system": system, "messages": messages}).encode(),
            headers={"content-type": "application/json", "x-api-key": key})
        return json.loads(urllib.request.urlopen(request).read())["content"][0]["text"]

    system, task = {"role": "system", "content": "You solve tasks."}, {"role": "user", "content": "the task"}
    first = chat([system, task])
    history = [task, {"role": "assistant", "content": first}, {"role": "user", "content": "go on"}]
    second = anthropic("You solve tasks.", history)  # (another API, the same conversation: it goes on)
    chat([system, *history, {"role": "assistant", "content": second}, {"role": "user", "content": "and?"}])
    chat([system, *history, {"role": "assistant", "content": second}, {"role": "user", "content": "and?"}])
    chat([{"role": "system", "content": "You help the solver."}, {"role": "user", "content": "a part"}])
    chat([system, {"role": "user", "content": "the task, summarised so far"}])
    print(json.dumps({"reward": 1.0}))
'''


def test_turns_are_linked_by_exact_prefix_whatever_api_asks_and_breaks_are_marked(tmp_path):
    from openenv_gym.client.local import LocalServer

    with LocalServer(agent_env(tmp_path / "branches", BRANCHES), 1, 10) as server:
        answers = play(server.url, ["one", "two", "three", "three again", "part", "summary"], {"index": 0})
    turns = [info["turn"] for _, info in answers[:1]] + [answer[4]["turn"] for answer in answers[1:-1]]
    assert [(turn["parent"], turn["branch"], turn["kind"]) for turn in turns] == [
        (None, 0, "start"), (0, 0, "continues"), (1, 0, "continues"), (1, 1, "retry"),
        (None, 2, "sub-agent"), (None, 3, "compaction")]
    assert [answer[4]["dialect"] for answer in answers[1:3]] == ["anthropic", "chat"]
    assert answers[-1][1:3] == (1.0, True)


def branch_episodes(folder) -> list:
    """One episode of the BRANCHES program in `folder`, played by rollouts() (a policy that says "ok"), recorded."""
    import asyncio
    import contextlib

    from openenv_gym import rollouts
    from openenv_gym.client.local import LocalServer
    from openenv_gym.manifests import load_manifest
    from openenv_gym.registry import register_manifest

    register_manifest(load_manifest(agent_env(folder, BRANCHES)))

    async def policy(messages: list, tools: list) -> str:
        return "ok"

    async def main(url: str) -> list:
        async with contextlib.aclosing(rollouts(f"openenv/agent-{folder.name}", policy, base_url=url, num_envs=1,
                                                episodes=1)) as stream:
            return [episode async for episode in stream]
    with LocalServer(folder, 1, 10) as server:
        return asyncio.run(main(server.url))


def test_the_rollout_records_carry_the_turn_graph(tmp_path):
    [episode] = branch_episodes(tmp_path / "branches")
    assert [turn["kind"] for turn in episode.turns] == ["start", "continues", "continues", "retry", "sub-agent",
                                                        "compaction"]
    assert episode.to_json()["turns"][3] == {"turn": 3, "parent": 1, "branch": 1, "kind": "retry"}
