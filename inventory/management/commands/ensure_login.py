import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand
from django.db import transaction

from access.roles import ADMIN

NOTE_NAME = "initial-login.txt"


class Command(BaseCommand):
    help = "Create an admin login for a fresh install (once) and print its credentials."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--username", default="admin")
        parser.add_argument("--password", default=None, help="Default: a random one, printed.")

    def handle(self, *args, username: str, password: str | None, **options) -> None:
        user_model = get_user_model()
        if user_model.objects.filter(username=username).exists():
            self.stdout.write(f"Login '{username}' already exists; password unchanged.")
            return
        password = password or secrets.token_urlsafe(12)
        # The user and its role together, or neither: a half-made login cannot be made again.
        with transaction.atomic():
            user = user_model.objects.create_superuser(
                username=username, email="", password=password
            )
            user.groups.add(Group.objects.get(name=ADMIN))
        # Printed before the note is written: whatever happens to the file, the operator has it.
        self.stdout.write(
            self.style.SUCCESS(f"Created login  username: {username}  password: {password}")
        )
        self.write_note(username, password)

    def write_note(self, username: str, password: str) -> None:
        """Keep the credentials for the operator in var/ (git-ignored, private to the host).
        A fresh checkout on PostgreSQL and Redis has no var/ yet: nothing else made it."""
        note = Path(settings.VAR_DIR) / NOTE_NAME
        try:
            note.parent.mkdir(parents=True, exist_ok=True)
            note.touch(mode=0o600, exist_ok=True)
            note.chmod(0o600)  # before the password is in it
            note.write_text(f"username: {username}\npassword: {password}\n")
        except OSError as exc:
            self.stderr.write(f"Could not keep the credentials in {note} ({exc}); note them now.")
