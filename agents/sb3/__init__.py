"""The strategies inside Stable-Baselines3: ``ParamExplorePolicy`` for SB3's DDPG/TD3, and
the adapter that lets ``train_agent --engine sb3`` drive an SB3 model."""
