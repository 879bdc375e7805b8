"""API tokens kept as SHA-256 digests: the database never holds a usable key.

`Authorization: Token <key>` works as with DRF's own tokens, but the key is shown once, when
an administrator creates it (admin site, or `issue_token`), and only its digest is stored, so
a leaked backup or a read-only database account does not leak logins. The keys are 256-bit
random strings, so an unsalted fast hash is enough (a salt protects guessable secrets).
Deleting the row revokes the key.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

# Enough of the key to tell tokens apart in a list, far too little to guess the rest.
PREFIX_CHARS = 6


def digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class ApiToken(models.Model):
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens"
    )
    name = models.CharField(max_length=100, blank=True, help_text="What the token is for.")
    key_digest = models.CharField(max_length=64, unique=True, editable=False)
    key_prefix = models.CharField(max_length=PREFIX_CHARS, editable=False)
    created = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        app_label = "access"
        ordering = ["user__username", "-created"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.key_prefix}… ({self.user})"

    def set_new_key(self) -> str:
        """Give the token a fresh random key; returns it (the only time it is known)."""
        key = secrets.token_urlsafe(32)
        self.key_digest, self.key_prefix = digest(key), key[:PREFIX_CHARS]
        return key


def issue_token(user, name: str = "") -> tuple[ApiToken, str]:
    """Create a token for `user`; returns it and its key, which is never stored."""
    token = ApiToken(user=user, name=name)
    key = token.set_new_key()
    token.save()
    return token, key


class HashedTokenAuthentication(TokenAuthentication):
    """DRF's `Token <key>` header, looked up by the key's digest."""

    def authenticate_credentials(self, key):
        token = ApiToken.objects.select_related("user").filter(key_digest=digest(key)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("Invalid token.")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("User inactive or deleted.")
        now = timezone.now()
        if token.last_used_at is None or (now - token.last_used_at).total_seconds() > 60:
            # At most one write a minute per token: enough to see unused tokens.
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token
