"""What accounting tells the apps above it, without knowing them (they connect in `ready`)."""

from __future__ import annotations

from django.dispatch import Signal

# Sent inside an import's transaction when it created or updated usage records of a cluster.
# Arguments: cluster_id, reason (why analyses over that cluster are now out of date).
usage_imported = Signal()
