"""Credentials of outbound sources (Prometheus bearer tokens, slurmrestd JWTs), encrypted at
rest with Fernet; the key is derived from a setting and a label per kind of credential."""

from __future__ import annotations

import base64
import hashlib

from cryptography.fernet import Fernet, InvalidToken
from django.conf import settings


def _fernet(label: str) -> Fernet:
    # TELEMETRY_TOKEN_KEY when set, else derived from SECRET_KEY (rotating it needs re-entry).
    secret = getattr(settings, "TELEMETRY_TOKEN_KEY", "") or settings.SECRET_KEY
    digest = hashlib.sha256(f"fleetwise-{label}:{secret}".encode()).digest()
    return Fernet(base64.urlsafe_b64encode(digest))


def encrypt_secret(plain: str, *, label: str) -> str:
    return _fernet(label).encrypt(plain.encode()).decode()


def decrypt_secret(ciphertext: str, *, label: str) -> str | None:
    """The secret, or None when the key changed since it was stored (enter it again)."""
    try:
        return _fernet(label).decrypt(ciphertext.encode()).decode()
    except InvalidToken:
        return None
