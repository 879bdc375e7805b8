from django.apps import AppConfig


class TelemetryConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "telemetry"
    verbose_name = "GPU telemetry (DCGM via Prometheus)"

    def ready(self) -> None:
        from planner.measured_sources import TELEMETRY, register_provider
        from telemetry.jobs import register_jobs
        from telemetry.selectors import measured_factors

        register_jobs()
        # A cluster takes allocation from one source kind: Slurm usage into a Kubernetes one fails.
        from accounting.signals import usage_imported
        from telemetry.kubernetes.services import refuse_slurm_into_kubernetes

        usage_imported.connect(
            refuse_slurm_into_kubernetes, dispatch_uid="telemetry.kubernetes.one_source_kind"
        )
        # ... and is refused at upload (a 400); analyses name the source ("measured (Kubernetes)").
        from accounting.usage_sources import register_source_names, register_upload_check
        from telemetry.kubernetes.services import kubernetes_clusters, kubernetes_upload_refusal

        register_upload_check("kubernetes", kubernetes_upload_refusal)
        register_source_names("kubernetes", kubernetes_clusters)
        # Analyses read the MFU proxy through the planner's hook: planner may not import us.
        register_provider(TELEMETRY, measured_factors)
