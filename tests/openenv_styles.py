"""One OpenEnv project (`openenv init`'s layout: models.py, server/app.py, server/<name>_environment.py) written in
each import style OpenEnv's own runner accepts, as published environments write them:

- relative: `from ..models import X` (OpenEnv's chess_env, grid_world_env, coding_env), the package declared in
  pyproject.toml's package-dir;
- absolute: `from <package>.models import X`, through the declared package's name;
- bare: `from models import X` and `from server.x import Y`, a folder run from itself (no package);
- chained: try/except chains whose first branch fails where the project runs (OpenEnv's snake_env imports its
  Environment from an older in-repo layout first);
- factory: the server app makes each session's environment with a factory that configures the class (OpenEnv's
  atari_env: `create_app(create_atari_environment, ...)`), which the class cannot be made without;
- path_setup: the server app puts its folder on sys.path as it is imported, and the environment imports a module
  from there by its bare name (OpenEnv's calendar_env).

The environment adds each action's delta to a total; the episode ends at its goal (ten, five with the factory).
"""

from __future__ import annotations

import textwrap
from pathlib import Path

STYLES = ("relative", "absolute", "bare", "chained", "factory", "path_setup")

MODELS = """
from openenv.core.env_server.types import Action, Observation


class CounterAction(Action):
    delta: int


class CounterObservation(Observation):
    total: int = 0
"""

ENVIRONMENT = """
from uuid import uuid4

{environment_import}
from openenv.core.env_server.types import State

{models_import}


class CounterEnvironment(Environment):
    SUPPORTS_CONCURRENT_SESSIONS = True

    def __init__(self, {goal_parameter}):
        self._state = State(episode_id=str(uuid4()), step_count=0)
        self._total = 0
        self._goal = goal

    def reset(self, seed=None, episode_id=None, **kwargs):
        self._state = State(episode_id=episode_id or str(uuid4()), step_count=0)
        self._total = 0
        return CounterObservation(total=0)

    def step(self, action: CounterAction):
        self._state.step_count += 1
        self._total += action.delta
        return CounterObservation(total=self._total, reward=float(action.delta), done=self._total >= {goal_check})

    @property
    def state(self):
        return self._state
"""

APP = """
{app_setup}
from openenv.core.env_server.http_server import create_app

{app_imports}
{factory}
app = create_app({made_with}, CounterAction, CounterObservation, env_name="counter")
"""
FACTORY = """

def create_counter_environment():
    return CounterEnvironment(goal=5)

"""
PATH_SETUP = "import os\nimport sys\n\nsys.path.insert(0, os.path.dirname(__file__))"

SDK_ENVIRONMENT = "from openenv.core.env_server.interfaces import Environment"
IMPORTS = {  # style -> (the environment module's Environment import, its models import, the app's imports)
    "relative": (SDK_ENVIRONMENT, "from ..models import CounterAction, CounterObservation",
                 "from ..models import CounterAction, CounterObservation\n"
                 "from .counter_environment import CounterEnvironment"),
    "absolute": (SDK_ENVIRONMENT, "from {package}.models import CounterAction, CounterObservation",
                 "from {package}.models import CounterAction, CounterObservation\n"
                 "from {package}.server.counter_environment import CounterEnvironment"),
    "bare": (SDK_ENVIRONMENT, "from models import CounterAction, CounterObservation",
             "from models import CounterAction, CounterObservation\n"
             "from server.counter_environment import CounterEnvironment"),
    "factory": (SDK_ENVIRONMENT, "from ..models import CounterAction, CounterObservation",
                "from ..models import CounterAction, CounterObservation\n"
                "from .counter_environment import CounterEnvironment"),
    "path_setup": (SDK_ENVIRONMENT, "from counter_goal import GOAL\nfrom ..models import CounterAction, "
                   "CounterObservation",
                   "from ..models import CounterAction, CounterObservation\n"
                   "from .counter_environment import CounterEnvironment"),
    "chained": ("try:\n    from core.env_server.interfaces import Environment\nexcept ImportError:\n"
                "    from openenv.core.env_server.interfaces import Environment",
                "try:\n    from ..models import CounterAction, CounterObservation\nexcept ImportError:\n"
                "    from models import CounterAction, CounterObservation",
                "try:\n    from ..models import CounterAction, CounterObservation\n"
                "    from .counter_environment import CounterEnvironment\nexcept ImportError:\n"
                "    from models import CounterAction, CounterObservation\n"
                "    from server.counter_environment import CounterEnvironment"),
}


def write_project(parent: Path, style: str) -> Path:
    """The counter project in `style`, as parent/counter_<style>; returns its folder."""
    package = f"counter_{style}"
    folder = parent / package
    environment_import, models_import, app_imports = (text.format(package=package) for text in IMPORTS[style])
    goal = {"factory": ("goal", "self._goal"), "path_setup": ("goal=GOAL", "self._goal")}.get(style,
                                                                                              ("goal=10", "self._goal"))
    files = {
        "models.py": MODELS,
        "server/counter_environment.py": ENVIRONMENT.format(environment_import=environment_import,
                                                            models_import=models_import, goal_parameter=goal[0],
                                                            goal_check=goal[1]),
        "server/app.py": APP.format(app_imports=app_imports, app_setup=PATH_SETUP if style == "path_setup" else "",
                                    factory=FACTORY if style == "factory" else "",
                                    made_with="create_counter_environment" if style == "factory"
                                    else "CounterEnvironment"),
        "server/__init__.py": "",
        "openenv.yaml": f"spec_version: 1\nname: {package}\ntype: space\nruntime: fastapi\napp: server.app:app\n",
        "pyproject.toml": textwrap.dedent(f"""
            [project]
            name = "openenv-{package}"
            version = "0.1.0"
            dependencies = ["openenv==0.10.0"]
            """)}
    if style != "bare":  # a package, declared as OpenEnv's envs declare theirs
        files["__init__.py"] = ""
        files["pyproject.toml"] += textwrap.dedent(f"""
            [tool.setuptools]
            packages = ["{package}", "{package}.server"]
            package-dir = {{ "{package}" = ".", "{package}.server" = "server" }}
            """)
    if style == "path_setup":
        files["server/counter_goal.py"] = "GOAL = 10\n"
    for name, text in files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text.lstrip("\n"))
    return folder
