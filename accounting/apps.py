from django.apps import AppConfig


class AccountingConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "accounting"
    verbose_name = "Usage and cost accounting"

    def ready(self) -> None:
        from accounting.inventory_hooks import connect
        from accounting.jobs import register_jobs

        register_jobs()
        connect()  # what deleting a cluster or pool means for usage (inventory.deletion)
