"""The DDPG agent: environment loop, update (eager and compiled), networks, replay,
evaluation, strategies by name, the agent's hyperparameters and its checkpoints."""
