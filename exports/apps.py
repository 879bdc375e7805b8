from django.apps import AppConfig


class ExportsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "exports"
    verbose_name = "Spreadsheet exports"

    def ready(self) -> None:
        from exports.jobs import register_jobs

        register_jobs()
