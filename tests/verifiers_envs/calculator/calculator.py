"""A ToolEnv with two Python tools: compute with add and multiply, then answer in <answer> tags."""

import verifiers as vf
from datasets import Dataset

PROBLEMS = [("(3 + 4) * 5", "35"), ("2 * 8 + 1", "17"), ("(6 + 6) * (2 + 1)", "36")]


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a + b


def multiply(a: int, b: int) -> int:
    """Multiply two integers.

    Args:
        a: the first number
        b: the second number
    """
    return a * b


def load_environment(max_turns: int = 6):
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def correct_answer(completion, answer, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    rows = [{"question": f"Compute {expr} with the tools, then give <answer>N</answer>.", "answer": a}
            for expr, a in PROBLEMS]
    return vf.ToolEnv(tools=[add, multiply], max_turns=max_turns, dataset=Dataset.from_list(rows), parser=parser,
                      rubric=vf.Rubric(funcs=[correct_answer], weights=[1.0], parser=parser))
