"""openenv_echo: the environment `openenv init` scaffolds, with concurrent sessions on."""
