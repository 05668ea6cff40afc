from openenv_gym.cli import main

main()
