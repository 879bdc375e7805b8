"""The engine tests' hypothesis profile (pure Python: no Django needed); their shared rows
are in tests/support/engine_rows.py."""

from __future__ import annotations

from hypothesis import settings

settings.register_profile("engine", deadline=None, max_examples=60)
settings.load_profile("engine")
