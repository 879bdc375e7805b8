"""Bearer tokens of Prometheus sources, encrypted at rest (core.secrets)."""

from __future__ import annotations

from core.secrets import decrypt_secret, encrypt_secret

LABEL = "telemetry-token"


def encrypt_token(token: str) -> str:
    return encrypt_secret(token, label=LABEL)


def decrypt_token(ciphertext: str) -> str | None:
    """The token, or None when the key changed since it was stored (enter it again)."""
    return decrypt_secret(ciphertext, label=LABEL)
