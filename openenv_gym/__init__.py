"""openenv_gym: agentic RL environments as Gymnasium envs, served with one isolated session each."""
