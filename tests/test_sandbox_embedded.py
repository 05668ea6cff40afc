"""gym.make's embedded local server on a machine that cannot make sandboxes: an environment that runs programs is
refused, naming both ways out, unless made with sandbox=False, which starts the local server --no-sandbox.

Real parts: the shell agent's folder, a real local server (bubblewrap hidden from it by an empty PATH), loopback."""

import pickle

import gymnasium as gym
import pytest
from conftest import ROOT

import openenv_gym
from openenv_gym.client.local import stop_local_servers
from openenv_gym.manifests import load_manifest
from openenv_gym.registry import register_manifest
from openenv_gym.targets import resolve

SHELL = ROOT / "tests" / "sandbox_envs" / "shell"


@pytest.mark.bench  # a server of its own without bubblewrap (14 s): make bench runs it
def test_the_embedded_server_runs_an_agent_env_without_bubblewrap_only_with_sandbox_false(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # the local server's: no bwrap on it
    manifest = load_manifest(SHELL)
    registered = manifest.gym_id not in gym.registry
    register_manifest(manifest)
    envs = []
    try:
        with pytest.raises(openenv_gym.ServerStartError, match=r"(?s)runs programs.*bubblewrap \(bwrap\) is not "
                                                                 r"installed.*serve it with --no-sandbox.*"
                                                                 r"gym\.make\(\.\.\., sandbox=False\)"):
            openenv_gym.RemoteEnv(env=str(SHELL))

        env = gym.make(manifest.gym_id, sandbox=False)
        envs.append(env)
        env.reset(options={"index": 0})
        obs, reward, terminated, truncated, info = env.step("echo hi")
        assert obs.endswith("hi\n") and not (terminated or truncated), info
        obs, reward, terminated, truncated, info = env.step("exit")
        assert terminated and reward == 1.0, info
        url = env.unwrapped.base_url

        # The same local server, for RemoteEnv too; and a target rebuilt from its settings in another process
        # (a pickled recipe) keeps sandbox=False, reaching that server.
        plain = openenv_gym.RemoteEnv(env=str(manifest.folder), sandbox=False)
        envs.append(plain)
        assert plain.base_url == url and plain.target.sandbox is False
        target = resolve(manifest.gym_id, sandbox=False)
        rebuilt = resolve(manifest.gym_id, **pickle.loads(pickle.dumps(target.settings())))
        assert target.urls == rebuilt.urls == (url,) and rebuilt.sandbox is False

        # A running server sandboxes or not as it was started: sandbox=False cannot change it.
        with pytest.raises(ValueError, match=r"sandbox=False is for gym\.make's local server.*--no-sandbox"):
            gym.make(manifest.gym_id, base_url=url, sandbox=False)
        with pytest.raises(ValueError, match=r"sandbox=False is for gym\.make's local server"):
            openenv_gym.RemoteEnv(env=str(SHELL), base_url=url, sandbox=False)
    finally:
        for env in envs:
            env.close()
        stop_local_servers()
        if registered:
            gym.registry.pop(manifest.gym_id, None)
