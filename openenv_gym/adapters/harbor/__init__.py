"""Harbor task packages as environments: each episode one trial in a sandbox of its own (trial.py), stepped with
bash and submit (session.py); tools/ stands in for the test-time installs tasks' scripts make."""

from openenv_gym.adapters.harbor.session import load_harbor_environment

__all__ = ["load_harbor_environment"]
