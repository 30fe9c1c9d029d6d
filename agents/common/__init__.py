"""What every family shares: errors and checks, the learner-run contract (callbacks), env
creation and evaluation, checkpoints as data, the strategy registry, action noise,
initialisation schemes, the bonus protocol, devices and the memory budget."""
