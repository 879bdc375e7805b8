"""Send the worker jobs that were queued while the task broker could not be reached."""

from django.core.management.base import BaseCommand, CommandError

from core.jobs.dispatch import dispatch_pending, pending_count


class Command(BaseCommand):
    help = (
        "Send analyses, plans and usage imports that are queued but were never sent because "
        "the broker was unreachable (beat does this every minute too)."
    )

    def handle(self, *args, **options):
        result = dispatch_pending()
        waiting = pending_count()
        self.stdout.write(f"Sent {result['sent']} deferred job(s); {waiting} still waiting.")
        if waiting:
            raise CommandError("The broker is still unreachable; run this again later.")
