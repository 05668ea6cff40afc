"""Reverse a word, in NeMo Gym's Gymnasium protocol (a GymnasiumServer: /reset, then /step with each reply): a
right answer ends the episode with reward 1, a wrong one is told so, one with no text is refused (HTTP 400), and a
`hint` call answers with the reversed word's first letter as a tool output. Three wrong answers truncate the
episode. Written to NeMo Gym's published rules for Gymnasium-style servers."""

from typing import Any

from fastapi import HTTPException
from nemo_gym.openai_utils import NeMoGymResponse
from resources_servers.gymnasium import GymnasiumServer, extract_text


class ReverseGymServer(GymnasiumServer):
    async def reset(self, metadata: dict, session_id: str | None = None) -> tuple[str | None, dict]:
        self.session_state[session_id] = {"word": metadata["word"], "misses": 0}
        return f"Reverse the word: {metadata['word']}", {}

    async def step(self, action: NeMoGymResponse, metadata: dict, session_id: str | None = None
                   ) -> tuple[str | None, float, bool, bool, dict[str, Any]]:
        state = self.session_state[session_id]
        answer = state["word"][::-1]
        calls = [item for item in action.output if item.type == "function_call"]
        if calls:
            return None, 0.0, False, False, {"tool_outputs": [self.tool_output(call, answer[0]) for call in calls]}
        if not extract_text(action).strip():
            raise HTTPException(status_code=400, detail="No answer found in the response.")
        if extract_text(action).strip().lower() == answer:
            return "Right.", 1.0, True, False, {}
        state["misses"] += 1
        return "No, try again.", 0.0, False, state["misses"] >= 3, {"misses": state["misses"]}


if __name__ == "__main__":
    ReverseGymServer.run_webserver()
