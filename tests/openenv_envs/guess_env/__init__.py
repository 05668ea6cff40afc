"""guess_env: an OpenEnv environment laid out as `openenv init` scaffolds one."""
