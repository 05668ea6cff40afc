"""Episodes played by a policy: the rollout stream, OpenAI-compatible policies, and the episode records."""

from openenv_gym.rollout.groups import Group
from openenv_gym.rollout.openai import OpenAIPolicy
from openenv_gym.rollout.records import Episode, TurnTokens
from openenv_gym.rollout.stream import rollouts
from openenv_gym.rollout.turns import Policy, Reply, ToolCall

__all__ = ["Episode", "Group", "OpenAIPolicy", "Policy", "Reply", "ToolCall", "TurnTokens", "rollouts"]
