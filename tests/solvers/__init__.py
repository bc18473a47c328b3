"""Tests of gangopt.solvers (mirrors the package)."""
