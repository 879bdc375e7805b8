"""What the planner tells the apps above it, without knowing them (they connect in `ready`)."""

from __future__ import annotations

from django.dispatch import Signal

# Sent after an analysis run's result is stored. Arguments: analysis_id.
analysis_succeeded = Signal()
