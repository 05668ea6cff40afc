"""A single-turn quiz whose rubric scores groups: correctness per rollout, plus three group reward functions (the
shortest correct answer of the group wins; agreement with the group's most common answer; the group's share of
tagged answers), each of a style Verifiers takes as a group function: plural parameters, `states`, a list return."""

from collections import Counter

import verifiers as vf
from datasets import Dataset

TRAIN = [("What is 2 + 3?", "5"), ("What is 7 * 6?", "42"), ("Capital of France?", "Paris")]


def load_environment():
    parser = vf.XMLParser(["answer"], answer_field="answer")

    def correct_answer(completion, answer, **kwargs) -> float:
        return 1.0 if (parser.parse_answer(completion) or "").strip() == answer else 0.0

    async def shortest_correct(completions, answers, **kwargs) -> list[float]:  # async, as Verifiers documents
        lengths = [len(str(c)) if (parser.parse_answer(c) or "").strip() == a else None
                   for c, a in zip(completions, answers, strict=True)]
        best = min((n for n in lengths if n is not None), default=None)
        return [1.0 if n is not None and n == best else 0.0 for n in lengths]

    def agreement(states) -> list[float]:
        given = [(parser.parse_answer(s["completion"]) or "").strip() for s in states]
        common = Counter(given).most_common(1)[0][1]
        return [Counter(given)[g] / common for g in given]

    def tagged_share(**kwargs) -> list[float]:  # a group function by its list return alone
        tagged = ["<answer>" in str(c) for c in kwargs["completions"]]
        return [sum(tagged) / len(tagged) if t else 0.0 for t in tagged]

    rubric = vf.Rubric(funcs=[correct_answer, shortest_correct, agreement, tagged_share],
                       weights=[1.0, 0.5, 0.25, 0.1], parser=parser)
    return vf.SingleTurnEnv(dataset=Dataset.from_list([{"question": q, "answer": a} for q, a in TRAIN]),
                            system_prompt="Answer in <answer> tags.", parser=parser, rubric=rubric)
