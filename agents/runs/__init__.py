"""A run on disk: settings resolved from YAML layers, the run directory (events, eval.csv,
checkpoints, resume) and grids of runs."""
