"""Tests of gangopt.replay (mirrors the package)."""
