from django.apps import AppConfig


class InventoryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "inventory"
    verbose_name = "Inventory"

    def ready(self) -> None:
        from inventory import signals  # noqa: F401
        from inventory.jobs import register_jobs

        register_jobs()
