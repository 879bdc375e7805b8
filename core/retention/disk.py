"""The health page's disk figure: bytes of stored files per folder, and the disk's free space."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from django.core.cache import cache
from django.core.files.storage import FileSystemStorage, default_storage

from core.retention.orphans import upload_roots

CACHE_KEY = "fleetwise:disk-usage"
# Walking the folders costs a moment: the figure is reused for this long.
CACHE_S = 60


def _folder_bytes(folder: Path) -> int:
    total = 0
    for parent, _, files in os.walk(folder):
        for name in files:
            try:
                total += (Path(parent) / name).stat().st_size
            except FileNotFoundError:
                continue  # deleted while we walked
    return total


def _measure() -> dict[str, object]:
    if not isinstance(default_storage, FileSystemStorage):
        return {"storage": type(default_storage).__name__, "measured": False}
    base = Path(default_storage.location)
    by_folder = {root: _folder_bytes(base / root) for root in sorted(upload_roots())}
    disk = shutil.disk_usage(base if base.exists() else base.parent)
    return {
        "files_bytes": sum(by_folder.values()),
        "by_folder_bytes": by_folder,
        "free_bytes": disk.free,
        "total_bytes": disk.total,
    }


def disk_usage() -> dict[str, object]:
    """Bytes of the uploaded and generated files (per folder: usage-imports, exports, …) and
    the free and total bytes of the disk holding them; cached for a minute."""
    figure = cache.get(CACHE_KEY)
    if figure is None:
        figure = _measure()
        cache.set(CACHE_KEY, figure, CACHE_S)
    return figure
