"""`manage.py ensure_login` on a fresh checkout (issue #28): no var/ folder yet (PostgreSQL and
Redis make none), the login is created, its password printed and kept; a second run changes
nothing. It crashed after creating the user, before printing the password."""

from __future__ import annotations

import io
import stat

import pytest
from django.contrib.auth import authenticate
from django.contrib.auth.models import User
from django.core.management import call_command

from access.roles import ADMIN

pytestmark = pytest.mark.django_db


def ensure_login(**options) -> tuple[str, str]:
    out, err = io.StringIO(), io.StringIO()
    call_command("ensure_login", stdout=out, stderr=err, **options)
    return out.getvalue(), err.getvalue()


def printed_password(output: str) -> str:
    return output.split("password: ", 1)[1].strip()


def test_a_fresh_checkout_without_var_gets_the_login_and_its_note(settings, tmp_path):
    settings.VAR_DIR = tmp_path / "checkout" / "var"  # nothing made it yet
    output, errors = ensure_login()
    assert "Created login  username: admin  password: " in output and errors == ""
    password = printed_password(output)
    user = User.objects.get(username="admin")
    assert user.is_superuser and user.groups.filter(name=ADMIN).exists()
    assert authenticate(username="admin", password=password) == user
    note = settings.VAR_DIR / "initial-login.txt"
    assert note.read_text() == f"username: admin\npassword: {password}\n"
    assert stat.S_IMODE(note.stat().st_mode) == 0o600

    again, _ = ensure_login()
    assert again.strip() == "Login 'admin' already exists; password unchanged."
    assert authenticate(username="admin", password=password) == user


def test_an_unwritable_var_still_prints_the_password(settings, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("")
    settings.VAR_DIR = blocker / "var"  # cannot be made: its parent is a file
    output, errors = ensure_login(username="ops")
    password = printed_password(output)
    assert authenticate(username="ops", password=password) is not None
    assert "Could not keep the credentials" in errors and "note them now" in errors
