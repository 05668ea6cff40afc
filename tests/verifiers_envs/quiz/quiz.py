"""A single-turn quiz: the model answers in <reasoning>/<answer> tags; correctness and format are scored."""

import verifiers as vf
from datasets import Dataset

TRAIN = [("What is 2 + 3?", "5"), ("What is 7 * 6?", "42"), ("Capital of France?", "Paris")]
EVAL = [("What is 10 - 4?", "6"), ("Largest planet?", "Jupiter")]


def load_environment(system_prompt: str = "Reason in <reasoning> tags, then answer in <answer> tags."):
    parser = vf.XMLParser(["reasoning", "answer"], answer_field="answer")

    def correct_answer(completion, answer, **kwargs) -> float:
        given = parser.parse_answer(completion) or ""
        return 1.0 if given.strip().lower() == answer.lower() else 0.0

    def reasoned(completion, **kwargs) -> float:  # a thinking model's reasoning, where a reasoning parser puts it
        return float(any(message.get("role") == "assistant" and message.get("reasoning_content")
                         for message in completion))

    rubric = vf.Rubric(funcs=[correct_answer, parser.get_format_reward_func(), reasoned], weights=[1.0, 0.2, 0.0],
                       parser=parser)
    return vf.SingleTurnEnv(
        dataset=Dataset.from_list([{"question": q, "answer": a} for q, a in TRAIN]),
        eval_dataset=Dataset.from_list([{"question": q, "answer": a} for q, a in EVAL]),
        system_prompt=system_prompt, parser=parser, rubric=rubric)
