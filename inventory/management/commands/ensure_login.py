import secrets
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand

from access.roles import ADMIN


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
        user = user_model.objects.create_superuser(username=username, email="", password=password)
        user.groups.add(Group.objects.get(name=ADMIN))
        # Kept for the operator of a fresh install; var/ is git-ignored and private to the host.
        note = Path(settings.VAR_DIR) / "initial-login.txt"
        note.write_text(f"username: {username}\npassword: {password}\n")
        note.chmod(0o600)
        self.stdout.write(
            self.style.SUCCESS(f"Created login  username: {username}  password: {password}")
        )
