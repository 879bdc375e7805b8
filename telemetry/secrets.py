"""Bearer tokens of Prometheus sources, encrypted at rest (Fernet, key derived from a setting)."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def _fernet() -> Fernet:
    # TELEMETRY_TOKEN_KEY when set, else derived from SECRET_KEY (rotating it needs re-entry).
    secret = getattr(settings, "TELEMETRY_TOKEN_KEY", "") or settings.SECRET_KEY
    digest = hashlib.sha256(f"fleetwise-telemetry-token:{secret}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt_token(token: str) -> str:
    return _fernet().encrypt(token.encode()).decode()


def decrypt_token(ciphertext: str) -> str | None:
    """The token, or None when the key changed since it was stored (enter it again)."""
    try:
        return _fernet().decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        return None
