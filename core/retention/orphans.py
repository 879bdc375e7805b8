"""Files under the jobs' upload folders that no row refers to any more (a row deleted with
its cluster, a job deleted by an administrator, a write that never committed): deleted once
they are older than the retention period, as a referenced file would be."""

from __future__ import annotations

import contextlib
import datetime as dt
import os
from pathlib import Path

from django.core.files.storage import FileSystemStorage, default_storage
from django.db import models

from core.jobs.registry import kinds
from core.retention.files import file_fields, retention_days


def _root_of(model: type[models.Model], field: models.FileField) -> str | None:
    """The first folder of the field's ``upload_to`` ("usage-imports/%Y/%m/" → "usage-imports")."""
    upload_to = field.upload_to
    if callable(upload_to):
        try:
            upload_to = upload_to(model(), "x")
        except Exception:  # a callable that needs a saved row: its folder stays unknown
            return None
    first = str(upload_to).strip("/").split("/", 1)[0]
    return first if first and "%" not in first else None


def upload_roots() -> dict[str, list[type[models.Model]]]:
    """Folder under the media root → the job models storing files there."""
    roots: dict[str, list[type[models.Model]]] = {}
    for kind in kinds():
        for name in file_fields(kind.model):
            root = _root_of(kind.model, kind.model._meta.get_field(name))
            if root is not None:
                roots.setdefault(root, []).append(kind.model)
    return roots


def _referenced() -> set[str]:
    names: set[str] = set()
    for kind in kinds():
        for field in file_fields(kind.model):
            rows = kind.model._base_manager.exclude(**{field: ""}).values_list(field, flat=True)
            names.update(rows.iterator())
    return names


def _files_under(base: Path, root: str):
    for folder, _, files in os.walk(base / root):
        for name in files:
            path = Path(folder) / name
            yield path, path.relative_to(base).as_posix()


def delete_orphans(now: dt.datetime) -> int:
    """Delete unreferenced files older than the retention period (filesystem storage only)."""
    if not isinstance(default_storage, FileSystemStorage):
        return 0
    base = Path(default_storage.location)
    oldest = now.timestamp() - retention_days() * 86400
    referenced = _referenced()
    deleted = 0
    for root in upload_roots():
        for path, name in _files_under(base, root):
            with contextlib.suppress(FileNotFoundError):
                if name not in referenced and path.stat().st_mtime < oldest:
                    path.unlink()
                    deleted += 1
    return deleted
