"""Exit non-zero when no worker consumed beat's pulse lately (a container or unit health check)."""

from django.core.management.base import BaseCommand, CommandError

from core.jobs.pulse import pulse_health


class Command(BaseCommand):
    help = (
        "Check that some worker still consumes the queue: it ran the pulse beat sends every "
        "FLEETWISE_WORKER_PULSE_S within FLEETWISE_WORKER_STALE_AFTER_S. Exits 1 when not."
    )

    def handle(self, *args, **options):
        health = pulse_health()
        age = "never" if health.age_s is None else f"{health.age_s:.0f} s ago"
        if not health.ok:
            raise CommandError(f"{health.status} (last pulse: {age})")
        self.stdout.write(f"{health.status} (last pulse: {age})")
