"""The plans API's fixtures: the demo payload on the demo fleet (tests/support/builders.py).
A plan runs in this process with `tests.support.inline.run_plan_inline`."""

from __future__ import annotations

import pytest

from tests.support.builders import plan_payload


@pytest.fixture
def payload(demo_fleet):
    return plan_payload()
