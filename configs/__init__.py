"""YAML presets: agent defaults (ddpg.yaml) and one Table 3 preset per strategy."""
