"""A tiny random Qwen3 model and a tokenizer built here, with a chat template that supports tools: nothing comes
from a hub. `steer(...)` makes the random model write one given tool call and stop, so the env is really stepped.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
import trl
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3ForCausalLM

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MARKUP = ["<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>", "<think>", "</think>", "<tools>",
          "</tools>"]
CORPUS = [
    "I am thinking of an integer between 1 and 100. Find it. The number is higher than 50. lower than",
    '{"type": "function", "function": {"name": "guess", "description": "Guess the number.", "parameters": '
    '{"type": "object", "properties": {"number": {"type": "integer"}}, "required": ["number"]}}}',
    "You are a helpful assistant. # Tools You may call one or more functions to assist with the user query.",
    "system user assistant tool 0123456789 correct divisible by episode over return",
]


def tool_call_text(name: str, arguments: dict) -> str:
    """A tool call as Qwen3 writes it."""
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


def build_tokenizer(calls: list[str]) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer trained on a few lines, with Qwen3's chat template (shipped inside TRL). Each
    text in `calls` is one token, so that a single biased token writes a whole tool call."""
    core = Tokenizer(models.BPE())
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, special_tokens=SPECIAL, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    core.train_from_iterator(CORPUS, trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=SPECIAL[1:2])
    tokenizer.add_tokens(MARKUP + calls)
    template = Path(trl.__file__).parent / "chat_templates" / "qwen3.jinja"
    tokenizer.chat_template = template.read_text(encoding="utf-8")
    return tokenizer


def build_model(tokenizer: PreTrainedTokenizerFast, seed: int = 0) -> Qwen3ForCausalLM:
    torch.manual_seed(seed)
    config = Qwen3Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=4096,
                         pad_token_id=tokenizer.pad_token_id, eos_token_id=tokenizer.eos_token_id,
                         bos_token_id=None, tie_word_embeddings=True)
    return Qwen3ForCausalLM(config)


def steer(tokenizer: PreTrainedTokenizerFast, call: str, bias: float = 30.0) -> dict:
    """Generation kwargs that make a random model write `call` (one token) and then stop."""
    call_id = tokenizer.convert_tokens_to_ids(call)
    return {"sequence_bias": [[[call_id], bias], [[call_id, tokenizer.eos_token_id], 2 * bias]]}


class FixedReply:
    """A generation engine for make_rollout_func(generate=...) that writes the same ids every turn: no model. A class
    at module level, so that a rollout function using it pickles."""

    def __init__(self, ids: list[int]) -> None:
        self.ids = ids

    def __call__(self, sequences: list[list[int]], max_new_tokens: int) -> list[tuple[list[int], list[float]]]:
        ids = self.ids[:max_new_tokens]
        return [(ids, [0.0] * len(ids)) for _ in sequences]
