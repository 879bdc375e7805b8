"""A usage file kept between its preview and its import, so it is not chosen twice.

A browser cannot refill a file input, so the file stays on the server: stored under the usage
imports' upload folder (`usage-imports/previews/<token>/`), named in the user's session with a
random token that the page posts back in a hidden field. Only the session that previewed it
can import it; a new preview replaces it; the import deletes it once it has its own copy. A
file never imported is an orphan that the retention run deletes (`core/retention/orphans.py`).
"""

from __future__ import annotations

import contextlib
import secrets
from dataclasses import asdict, dataclass
from pathlib import PurePath

from django.core.files import File
from django.core.files.storage import default_storage

SESSION_KEY = "usage_import_kept"
FOLDER = "usage-imports/previews"


@dataclass(frozen=True)
class KeptUpload:
    token: str
    path: str  # in the default storage
    name: str  # as the user's file was named (the import's source name)
    size_bytes: int

    def open(self) -> File:
        """The stored bytes under the user's file name, as an upload the import service reads."""
        return File(default_storage.open(self.path, "rb"), name=self.name)


def kept(session, token: str) -> KeptUpload | None:
    """The session's kept file when ``token`` names it and it is still stored; else None."""
    entry = session.get(SESSION_KEY)
    if not token or not entry or not secrets.compare_digest(entry["token"], token):
        return None
    upload = KeptUpload(**entry)
    return upload if default_storage.exists(upload.path) else None


def keep(session, upload) -> KeptUpload:
    """Store ``upload`` for this session (replacing the one kept before) and name it there."""
    forget(session)
    token = secrets.token_urlsafe(16)
    name = PurePath(upload.name or "usage-file").name
    upload.seek(0)  # the preview has read it
    path = default_storage.save(f"{FOLDER}/{token}/{name}", upload)
    entry = KeptUpload(token=token, path=path, name=name, size_bytes=int(upload.size or 0))
    session[SESSION_KEY] = asdict(entry)
    return entry


def forget(session) -> None:
    """Delete the session's kept file, if any (it was imported, or another replaces it)."""
    entry = session.pop(SESSION_KEY, None)
    if entry:
        with contextlib.suppress(OSError):
            default_storage.delete(entry["path"])
