"""Checks every upload goes through before a reader opens it (pure Python: no Django)."""
