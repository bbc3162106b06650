"""DummyEnv: the smallest complete warp_drive environment."""
