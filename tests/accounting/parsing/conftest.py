"""Fixtures of the accounting-core tests (pure Python: no Django); their real-shaped Slurm
text is in tests/support/sacct_pitfalls.py."""

from __future__ import annotations

import io

import pytest

from tests.support.sacct_pitfalls import as_source, sacct_text


@pytest.fixture
def sacct_source() -> io.BytesIO:
    return as_source(sacct_text())
