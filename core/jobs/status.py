"""The states of a durable job, shared by every job kind."""

from django.db import models


class JobStatus(models.TextChoices):
    QUEUED = "queued", "Queued"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"


# A job waiting for, or held by, a worker: a queue, a failure or a recovery may still end it.
OPEN = (JobStatus.QUEUED, JobStatus.RUNNING)
