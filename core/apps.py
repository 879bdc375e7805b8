"""The shared core as a Django app: it owns the job framework's tables (the task delivery
ledger of core.jobs.quarantine)."""

from django.apps import AppConfig


class CoreConfig(AppConfig):
    name = "core"
    label = "core"
    verbose_name = "Core"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from core.localdirs import ensure_local_dirs

        ensure_local_dirs()
