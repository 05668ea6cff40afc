# /// script
# requires-python = ">=3.10"
# dependencies = ["openai", "anthropic"]
# ///
"""The agent loop: ask the model, run each shell call it makes in this folder, send the outputs back, until it
answers without a call."""

import argparse
import subprocess

DESCRIPTION = "Run a shell command in the task's folder; returns its output."
SCHEMA = {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}


def shell(command: str) -> str:
    done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
    return (done.stdout + done.stderr) or f"(exit {done.returncode}, no output)"


def responses_loop(args: argparse.Namespace) -> None:
    import json

    from openai import OpenAI

    client = OpenAI(base_url=args.base_url, api_key=args.api_key, max_retries=0)
    items: list[dict] = [{"role": "user", "content": args.prompt}]
    tools = [{"type": "function", "name": "shell", "description": DESCRIPTION, "parameters": SCHEMA}]
    extra = {"instructions": args.system} if args.system else {}
    for _ in range(args.max_turns):
        if args.stream:
            with client.responses.stream(model=args.model, input=items, tools=tools, **extra) as events:
                response = events.get_final_response()
        else:
            response = client.responses.create(model=args.model, input=items, tools=tools, **extra)
        calls = [item for item in response.output if item.type == "function_call"]
        for item in response.output:
            if item.type == "function_call":
                items.append({"type": "function_call", "call_id": item.call_id, "name": item.name,
                              "arguments": item.arguments})
            elif item.type == "message":
                items.append({"role": "assistant", "content": "".join(part.text for part in item.content
                                                                      if part.type == "output_text")})
        if not calls:
            return
        for call in calls:
            output = shell(json.loads(call.arguments)["command"])
            items.append({"type": "function_call_output", "call_id": call.call_id, "output": output})


def anthropic_loop(args: argparse.Namespace) -> None:
    from anthropic import Anthropic

    client = Anthropic(base_url=args.base_url.removesuffix("/v1"), api_key=args.api_key, max_retries=0)
    messages: list[dict] = [{"role": "user", "content": args.prompt}]
    tools = [{"name": "shell", "description": DESCRIPTION, "input_schema": SCHEMA}]
    extra = {"system": args.system} if args.system else {}
    for _ in range(args.max_turns):
        if args.stream:
            with client.messages.stream(model=args.model, max_tokens=1024, messages=messages, tools=tools,
                                        **extra) as events:
                message = events.get_final_message()
        else:
            message = client.messages.create(model=args.model, max_tokens=1024, messages=messages, tools=tools,
                                             **extra)
        messages.append({"role": "assistant", "content": [block.model_dump(exclude_none=True)
                                                          for block in message.content]})
        calls = [block for block in message.content if block.type == "tool_use"]
        if not calls:
            return
        messages.append({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": call.id, "content": shell(call.input["command"])}
            for call in calls]})


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    for name in ("--base-url", "--api-key", "--model", "--prompt", "--system"):
        parser.add_argument(name)
    parser.add_argument("--dialect", choices=["responses", "anthropic"], required=True)
    parser.add_argument("--stream", action="store_true")
    parser.add_argument("--max-turns", type=int, default=8)
    arguments = parser.parse_args()
    (responses_loop if arguments.dialect == "responses" else anthropic_loop)(arguments)
