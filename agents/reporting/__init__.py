"""Reading finished runs: curves across seeds, the published reference curves,
``compare_runs`` (figures and tables) and per-strategy aggregates for TensorBoard."""
