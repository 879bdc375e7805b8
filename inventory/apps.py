from django.apps import AppConfig


class InventoryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "inventory"
    verbose_name = "Inventory"

    def ready(self) -> None:
        from core.retention.sweeps import register_sweep
        from inventory import signals  # noqa: F401
        from inventory.deletion import purge_deleted
        from inventory.jobs import register_jobs

        register_jobs()
        # Clusters and pools deleted longer ago than FLEETWISE_DELETED_RETENTION_DAYS.
        register_sweep("purged_inventory", purge_deleted)
