"""A Verifiers v1 env server someone runs (verifiers 0.4's serve protocol: prime-rl's env-server, Verifiers' own
serve_env, another openenv-gym's --verifiers-port) as an environment: the shipped `openenv/verifiers-remote`, its
env_args {"address": "tcp://HOST:PORT", "taskset": {"id": ..., and the taskset's config}}.

A reset asks the server for one rollout of the task (Verifiers' own EnvClient.run), its model at this session's
address on the worker's model endpoint: each model request the rollout makes is a step's observation, answered by the
step's action, as for a v1 env served here (v1.py, whose sessions these are); the run's end is the final step, its
reward the first trace's, with the rewards by name, the metrics and the stop condition in info. Closing a session
mid-run cancels the run on the server. The model endpoint listens on loopback: the env server runs on this host.

Tasks: those of the taskset named, loaded here as prime-rl's orchestrator loads it (its package importable here, or
in the folder `taskset_path`), each sent to the server as the dump of its data.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from openenv_gym.adapters.endpoint import ModelEndpoint
from openenv_gym.adapters.verifiers.v1 import KEY_VARIABLE, MODEL, V1Factory
from openenv_gym.adapters.verifiers.v1_tasks import LazyTasks
from openenv_gym.errors import EnvError
from openenv_gym.manifests.schema import ManifestError, VerifiersManifest

ENV_ARGS = ("address", "taskset", "taskset_path", "sampling")
HEALTH_TIMEOUT = 5.0  # seconds the server has to answer its first health check


class RemoteFactory(V1Factory):
    def __init__(self, taskset: Any, tasks: LazyTasks, manifest: VerifiersManifest, endpoint: ModelEndpoint | None,
                 vf: Any, env_args: dict[str, Any]) -> None:
        super().__init__(taskset, tasks, manifest, endpoint, vf, env_args)
        self.address, self.sampling = env_args["address"], dict(env_args.get("sampling") or {})
        self.client: Any = None  # Verifiers' EnvClient, made on the worker's loop at the first episode

    async def serve(self) -> None:
        if self.client is not None:
            return
        from verifiers.v1.serve.client import EnvClient

        client = EnvClient(self.address)
        if not await client.health(timeout=HEALTH_TIMEOUT):
            await client.close()
            raise EnvError(f"no Verifiers env server answers at {self.address} (its health check): start it, or give "
                           "the address it serves on in env_args['address']")
        self.client = client

    async def run_episode(self, task: Any, base_url: str, on_trace: Callable[[Any], None]) -> Any:
        from verifiers.v1.types import SamplingConfig

        config = self.vf.EvalClientConfig(base_url=base_url, api_key_var=KEY_VARIABLE)
        try:
            return await self.client.run(config, MODEL, SamplingConfig(**self.sampling),
                                         task.data.model_dump(mode="json"))
        except RuntimeError as exc:  # (the server's reply said success: false, and why)
            raise EnvError(f"the Verifiers env server at {self.address} refused the run: {exc}") from None

    async def aclose(self) -> None:
        client, self.client = self.client, None
        if client is not None:
            await client.close()


def load_remote_environment(manifest: VerifiersManifest, env_args: dict[str, Any],
                            endpoint: ModelEndpoint | None) -> RemoteFactory:
    args = {**manifest.env_args, **env_args}
    unknown = sorted(set(args) - set(ENV_ARGS))
    if unknown or not isinstance(args.get("address"), str) or not isinstance(args.get("taskset"), dict):
        raise ManifestError(f"{manifest.name} takes env_args {{'address': 'tcp://HOST:PORT', 'taskset': {{'id': ..., "
                            f"...}}}} (and 'taskset_path', 'sampling'){f'; unknown: {unknown}' if unknown else ''}")
    if args.get("taskset_path"):
        sys.path.insert(0, str(args["taskset_path"]))
    import verifiers.v1 as vf

    try:
        taskset = vf.load_taskset(vf.resolve_env_config({"taskset": args["taskset"]}).taskset)
    except (ImportError, ValueError, TypeError) as exc:
        raise ManifestError(f"{manifest.name}: the taskset {args['taskset'].get('id')!r} does not load here: {exc} "
                            "(its package must be importable here, as prime-rl's orchestrator needs it: install it, "
                            "or give its folder in env_args['taskset_path'])") from None
    tasks = LazyTasks(taskset, manifest.max_tasks)
    return RemoteFactory(taskset, tasks, manifest, endpoint, vf, args)
