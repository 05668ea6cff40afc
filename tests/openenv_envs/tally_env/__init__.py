"""tally_env: an OpenEnv environment in `openenv init`'s layout, written for openenv_gym's tests. Each step adds a
delta to a running total; a negative delta makes the environment raise, as environments do on input they cannot
use (OpenEnv's server answers EXECUTION_ERROR and the episode goes on)."""
