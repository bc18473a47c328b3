"""Benchmark options: L and XL rounds run only with ``--run-slow`` or ``GANGOPT_BENCH_SLOW=1``."""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--run-slow", action="store_true", default=False, help="also run the L and XL benchmarks")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slow: L/XL benchmark, skipped unless --run-slow or GANGOPT_BENCH_SLOW=1")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--run-slow") or os.environ.get("GANGOPT_BENCH_SLOW", "") not in ("", "0"):
        return
    skip = pytest.mark.skip(reason="slow: use --run-slow or GANGOPT_BENCH_SLOW=1")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
