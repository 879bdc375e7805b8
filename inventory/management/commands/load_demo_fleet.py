from django.core.management.base import BaseCommand

from inventory.services import load_demo_fleet


class Command(BaseCommand):
    help = "Create (or refresh) the demo fleet: two sites, three clusters, a mixed A100/H100 pool."

    def handle(self, *args, **options) -> None:
        counts = load_demo_fleet()
        summary = ", ".join(f"{n} {k.replace('_', ' ')}" for k, n in counts.items())
        self.stdout.write(self.style.SUCCESS(f"Demo fleet ready: {summary}."))
