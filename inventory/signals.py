"""Inventory signal hooks (later issues mark dependent analyses stale here)."""
