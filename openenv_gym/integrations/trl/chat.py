"""Chat-template tokens for a conversation that grows turn by turn, written once and appended, never re-rendered.

The tokens that carry an env message after a model turn are what the template renders for that message and the
next generation prompt, after the model's end-of-turn token: found by rendering a two-message stand-in
conversation with and without the message (as TRL does for tool results). Multi-turn needs a template that
renders earlier turns the same whatever follows; for one that does not, TRL's training variant is used, as TRL
itself does.
"""

from __future__ import annotations

from typing import Any

from transformers import PreTrainedTokenizerBase
from trl.chat_template_utils import get_training_chat_template, is_chat_template_prefix_preserving

_STAND_IN = [{"role": "user", "content": "stand-in"}, {"role": "assistant", "content": "stand-in"}]


class ChatTokens:
    def __init__(self, tokenizer: PreTrainedTokenizerBase, template_kwargs: dict[str, Any] | None = None) -> None:
        self.tokenizer = tokenizer
        self.template = None if is_chat_template_prefix_preserving(tokenizer) else get_training_chat_template(
            tokenizer)
        self.template_kwargs = template_kwargs or {}

    def _render(self, messages: list[dict[str, Any]], generation_prompt: bool,
                tools: list[dict[str, Any]] | None = None) -> list[int]:
        return list(self.tokenizer.apply_chat_template(
            messages, tools=tools or None, add_generation_prompt=generation_prompt, tokenize=True, return_dict=False,
            chat_template=self.template, **self.template_kwargs))

    def prompt_ids(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> list[int]:
        """The first prompt, with the env's tools in the template's tool section and the generation prompt."""
        return self._render(messages, True, tools)

    def message_ids(self, message: dict[str, Any]) -> list[int]:
        """The tokens that follow a model turn's end token: `message`, then the next generation prompt."""
        stand_in = _STAND_IN
        if message["role"] == "tool":  # some templates name the tool from the call that it answers
            stand_in = [_STAND_IN[0], {**_STAND_IN[1], "tool_calls": [
                {"type": "function", "function": {"name": message.get("name", "tool"), "arguments": {}}}]}]
        before = self._render(stand_in, False)
        after = self._render([*stand_in, message], True)
        ends = [k for k, token in enumerate(before) if token == self.tokenizer.eos_token_id]
        if ends:  # templates that write "<end>\n" after a turn: the model wrote "<end>", the rest is the env's
            before = before[:ends[-1] + 1]
        if after[:len(before)] != before:
            raise ValueError("the chat template renders earlier turns differently once a message follows, and TRL "
                             "has no prefix-preserving variant of it; multi-turn rollouts need one")
        return after[len(before):]
