"""OpenEnv's server of the quiz environment: uvicorn server.app:app (from this folder)."""

import os

from openenv.core.env_server.http_server import create_app

try:
    from ..models import QuizAction, QuizObservation
    from .quiz_environment import QuizEnvironment
except ImportError:
    from models import QuizAction, QuizObservation
    from server.quiz_environment import QuizEnvironment

app = create_app(QuizEnvironment, QuizAction, QuizObservation, env_name="quiz_env",
                 max_concurrent_envs=int(os.environ.get("MAX_CONCURRENT_ENVS", "8")))
