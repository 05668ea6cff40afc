"""An agent program: asks the model, runs the calculator when the model calls it, prints the final answer.

It knows nothing of openenv_gym: like any program written for an OpenAI-compatible server, it reads the
server's address, key and model from OPENAI_BASE_URL, OPENAI_API_KEY and OPENAI_MODEL.
"""

import ast
import json
import operator
import os
import sys

from openai import OpenAI

CALCULATOR = {"type": "function", "function": {
    "name": "calculate", "description": "Evaluate an arithmetic expression (+, -, *, /, parentheses).",
    "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}, "required": ["expression"]}}}
OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv,
             ast.USub: operator.neg}
MAX_TURNS = 5


def calculate(expression: str) -> str:
    def value(node: ast.AST) -> float:
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.left), value(node.right))
        if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
            return OPERATORS[type(node.op)](value(node.operand))
        raise ValueError("only numbers and + - * / ( )")
    try:
        return str(value(ast.parse(expression, mode="eval").body))
    except (SyntaxError, ValueError, ZeroDivisionError) as exc:
        return f"error: {exc}"


def main() -> None:
    client = OpenAI()  # OPENAI_BASE_URL and OPENAI_API_KEY
    messages = [{"role": "system", "content": "Answer with the number only. Use the calculator if you need it."},
                {"role": "user", "content": sys.argv[1]}]
    for _ in range(MAX_TURNS):
        reply = client.chat.completions.create(model=os.environ["OPENAI_MODEL"], messages=messages,
                                               tools=[CALCULATOR]).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            print(json.dumps({"answer": (reply.content or "").strip()}))
            return
        for call in reply.tool_calls:
            expression = json.loads(call.function.arguments or "{}").get("expression", "")
            messages.append({"role": "tool", "tool_call_id": call.id, "content": calculate(expression)})
    print(json.dumps({"answer": None}))


if __name__ == "__main__":
    main()
