"""tests/timing.py, the helpers that keep timing tests honest under load: they must still fail
on the regressions they exist for (a quadratic scan, a run past its budget)."""

from __future__ import annotations

import time

import pytest

from tests.timing import budget, growth, slowdown, within


def test_growth_tells_linear_from_quadratic():
    def linear(n: int) -> None:  # ~20 ms at n: longer than a scheduler slice
        sum(range(n * 2000))

    def quadratic(n: int) -> None:
        for i in range(n):
            sum(range(i * 2))

    assert growth(linear, 1_000, k=3) < 8
    assert growth(quadratic, 1_000, k=3) > 8  # ~16


def test_slowdown_and_budget_never_shrink_a_bound():
    assert slowdown() >= 1.0
    assert budget(2.0) >= 2.0 and budget(2.0, cap=2.5) <= 2.5


def test_within_fails_a_run_far_past_its_budget_and_names_every_try():
    with pytest.raises(AssertionError, match=r"in 2 tries: .*bound.*; .*bound"):
        within(0.01, lambda: time.sleep(0.3), tries=2, cap=0.1, what="the sleep")
    assert within(5.0, lambda: 42) == 42
