"""Worker bookkeeping shared by every process and broker (config.quarantine)."""

from django.db import models


class TaskDelivery(models.Model):
    """One job task's deliveries that started and never finished: each is a worker that died
    while running it (SIGKILL, the OOM killer, a hard time limit). Deleted when a delivery
    finishes; at ``FLEETWISE_TASK_MAX_WORKER_DEATHS`` the task is quarantined."""

    key = models.CharField(max_length=64, unique=True, help_text="sha256 of task name and args")
    task_name = models.CharField(max_length=200)
    args = models.CharField(max_length=500, blank=True)
    unfinished = models.PositiveIntegerField(default=0)
    last_started_at = models.DateTimeField()

    class Meta:
        verbose_name_plural = "task deliveries"

    def __str__(self) -> str:
        return f"{self.task_name}{self.args}: {self.unfinished} unfinished"
