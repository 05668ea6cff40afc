"""Multi-turn generation from token ids, with the logprob of each sampled token, through the trainer's own engine:
its vLLM server (`use_vllm=True, vllm_mode="server"`) or its model (transformers `generate`, the CPU path).

Token in, token out: the rollout function keeps every turn's ids as generated and never re-tokenizes a history.
"""

from __future__ import annotations

import copy
from typing import Any, Protocol

import torch
from transformers import PreTrainedTokenizerBase
from trl.models import unwrap_model_for_generation

Sample = tuple[list[int], list[float]]  # the generated ids (up to and with the first end token) and their logprobs


class Generator(Protocol):
    def __call__(self, sequences: list[list[int]], max_new_tokens: int) -> list[Sample]: ...


def tokenizer_of(trainer: Any) -> PreTrainedTokenizerBase:
    processing_class = trainer.processing_class
    return getattr(processing_class, "tokenizer", processing_class)


def _cut(ids: list[int], logprobs: list[float], ends: set[int]) -> Sample:
    """Keep the tokens up to and including the first end token."""
    for k, token in enumerate(ids):
        if token in ends:
            return ids[:k + 1], logprobs[:k + 1]
    return ids, logprobs


class ModelGenerator:
    """The trainer's model, with the trainer's generation config (sampling settings, generation_kwargs)."""

    def __init__(self, trainer: Any) -> None:
        self.trainer = trainer
        self.pad = tokenizer_of(trainer).pad_token_id
        self.ends = set(trainer.eos_token_ids)

    def __call__(self, sequences: list[list[int]], max_new_tokens: int) -> list[Sample]:
        trainer = self.trainer
        width = max(map(len, sequences))
        input_ids = torch.tensor([[self.pad] * (width - len(s)) + s for s in sequences])
        attention_mask = torch.tensor([[0] * (width - len(s)) + [1] * len(s) for s in sequences])
        config = copy.deepcopy(trainer.generation_config)
        config.max_new_tokens = max_new_tokens
        config.output_scores = True
        config.return_dict_in_generate = True
        device = trainer.accelerator.device
        with unwrap_model_for_generation(trainer.model_wrapped, trainer.accelerator,
                                         gather_deepspeed3_params=trainer.args.ds3_gather_for_generation,
                                         generation_kwargs=trainer.generation_kwargs,
                                         gradient_checkpointing_kwargs=trainer.args.gradient_checkpointing_kwargs,
                                         ) as model, torch.no_grad():
            output = model.generate(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device),
                                    generation_config=config)
            # the logprob of each sampled token under the distribution it was sampled from (processed logits)
            scores = model.compute_transition_scores(output.sequences, output.scores, normalize_logits=True)
        generated = output.sequences[:, width:].tolist()
        return [_cut(ids, lps, self.ends) for ids, lps in zip(generated, scores.float().tolist(), strict=True)]


class VLLMServerGenerator:
    """The trainer's vLLM server (`trl vllm-serve` / `vllm serve`), as TRL's own generation calls it."""

    def __init__(self, trainer: Any) -> None:
        if trainer.vllm_mode != "server":
            raise ValueError("make_rollout_func generates with vLLM in server mode only (vllm_mode='server'); "
                             "or set use_vllm=False to generate with the trainer's model")
        self.trainer = trainer
        self.client = trainer.vllm_generation.vllm_client
        self.ends = set(trainer.eos_token_ids)

    def __call__(self, sequences: list[list[int]], max_new_tokens: int) -> list[Sample]:
        trainer = self.trainer
        output = self.client.generate(
            prompts=sequences, n=1, max_tokens=max_new_tokens, temperature=trainer.temperature,
            top_p=trainer.top_p, top_k=trainer.top_k or 0, min_p=trainer.min_p or 0.0,
            repetition_penalty=trainer.repetition_penalty, logprobs=0,
            generation_kwargs=trainer.args.generation_kwargs)
        # logprobs come as [sequence][token][top-k]; element 0 is the sampled token's
        return [_cut(list(ids), [float(top[0]) for top in lps], self.ends)
                for ids, lps in zip(output["completion_ids"], output["logprobs"], strict=True)]


def generator_for(trainer: Any) -> Generator:
    return VLLMServerGenerator(trainer) if trainer.use_vllm else ModelGenerator(trainer)
