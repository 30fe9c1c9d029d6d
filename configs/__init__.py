"""The presets: agent defaults (ddpg.yaml) and one preset per strategy, each value with its
source. Installed as package data of ``agents.presets``, not as a module of its own."""
