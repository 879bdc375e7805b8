from django.apps import AppConfig


class AccountingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounting"
    verbose_name = "Usage and cost accounting"

    def ready(self) -> None:
        from accounting.jobs import register_jobs

        register_jobs()
