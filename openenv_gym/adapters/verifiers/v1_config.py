"""A Verifiers v1 environment's config, from the manifest's env_args and the server's, as Verifiers' command line
makes it: a key the Env's own config declares is the Env's (`--env.attempts`, `--env.agent.harness`, `id` to pair a
reusable Env such as `best-of-n`), every other key the taskset's (`--env.taskset.pieces`); a `taskset` object is
the taskset's explicitly. Every agent seat runs in the local subprocess runtime, on its own harness if the config
names one, else the taskset's, else the manifest's.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from openenv_gym.manifests.schema import ManifestError

TASKSET = "taskset"
ENV_ONLY = {"harness"}  # not the taskset's: Verifiers' Env config refuses it with where a harness goes (a seat)


def split_env_args(env_args: dict[str, Any], env_fields: set[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the Env's settings, the taskset's) of a v1 environment's env_args."""
    nested = env_args.get(TASKSET) or {}
    if not isinstance(nested, dict):
        raise ManifestError(f"env_args {TASKSET!r} holds the taskset's settings: an object, got {nested!r:.80}")
    env_keys = (env_fields | ENV_ONLY) - {TASKSET}
    env = {key: value for key, value in env_args.items() if key in env_keys}
    taskset = {key: value for key, value in env_args.items() if key not in env_keys and key != TASKSET} | nested
    return env, taskset


def env_config(vf: Any, taskset_id: str, env_args: dict[str, Any], manifest_harness: str) -> Any:
    """The EnvConfig Verifiers' loader takes, with every agent seat local."""
    from verifiers.v1.utils.loaders import (
        default_harness_id,
        env_config_type,
        harness_config_type,
        resolve_env_config,
        taskset_config_type,
    )

    env_id = env_args.get("id") if isinstance(env_args.get("id"), str) else ""
    config_type = env_config_type(taskset_id, env_id)
    env, taskset = split_env_args(env_args, set(config_type.model_fields))
    try:
        config = resolve_env_config({**env, TASKSET: {**taskset, "id": taskset_id}})
    except ValidationError as exc:
        taskset_fields = sorted(set(taskset_config_type(taskset_id).model_fields) - {"id"})
        raise ManifestError(
            f"env_args do not fit the environment ({exc.error_count()} error(s): "
            f"{'; '.join(_problem(error) for error in exc.errors(include_url=False)[:5])}). Keys the Env's config "
            f"declares go to it ({', '.join(sorted(set(config_type.model_fields) - {TASKSET}))}), any other to the "
            f"taskset's ({', '.join(taskset_fields)}); "
            f"{{'{TASKSET}': {{...}}}} names the taskset's explicitly") from None
    default_id = default_harness_id(taskset_id)
    harness_id = default_id if default_id != "bash" else manifest_harness
    seats = {}
    for name, agent in config:
        if isinstance(agent, vf.AgentConfig):
            harness = agent.harness or harness_config_type(harness_id).model_validate({"id": harness_id})
            seats[name] = agent.model_copy(update={"runtime": vf.SubprocessConfig(), "harness": harness})
    return config.model_copy(update=seats)


def _problem(error: dict[str, Any]) -> str:
    return f"{'.'.join(str(part) for part in error['loc'])}: {error['msg']}"
