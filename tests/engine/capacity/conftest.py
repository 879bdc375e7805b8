"""Fixtures of the capacity planner's tests (pure Python: no Django needed); their shared
inputs are in tests/support/capacity_inputs.py."""

from __future__ import annotations

import pytest

from tests.support.capacity_inputs import A100_80GB


@pytest.fixture
def a100() -> dict:
    return dict(A100_80GB)
