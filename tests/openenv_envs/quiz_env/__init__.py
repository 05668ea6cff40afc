"""quiz_env: an OpenEnv environment whose reset takes keyword arguments and no others, in the style of OpenEnv's
reasoning_gym env: `reset(dataset_name=..., seed=..., size=...)` builds a dataset of questions from the seed, and
each reset asks the dataset's next question. Written for openenv_gym's tests."""
