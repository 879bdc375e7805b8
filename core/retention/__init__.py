"""How long stored files are kept, and what is purged after its retention period.

Every file a job row holds (uploads: usage imports, telemetry files; generated: XLSX
exports, report files) is deleted by the periodic task ``core.apply_retention`` (beat, hourly)
once its job finished more than ``FLEETWISE_FILE_RETENTION_DAYS`` ago
(``FLEETWISE_FAILED_FILE_RETENTION_DAYS`` for a failed job); the row keeps its results and an
:class:`~core.retention.models.ExpiredFile` says when and why the file went, so pages answer
"file expired" instead of failing. Files no row refers to any more are deleted after the same
period. Apps add their own sweeps (inventory: clusters and pools deleted long enough ago) with
:func:`core.retention.sweeps.register_sweep`. ``disk.disk_usage`` is the health page's figure.
"""
