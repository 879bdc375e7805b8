"""The one beat entry that fires due report schedules (django-celery-beat, in the database)."""

from django.db import migrations

TICK_NAME = "reports: fire due schedules"
TICK_TASK = "reports.tick"


def create_tick(apps, schema_editor):
    IntervalSchedule = apps.get_model("django_celery_beat", "IntervalSchedule")
    PeriodicTask = apps.get_model("django_celery_beat", "PeriodicTask")
    every_minute, _ = IntervalSchedule.objects.get_or_create(every=1, period="minutes")
    PeriodicTask.objects.update_or_create(
        name=TICK_NAME,
        defaults={
            "task": TICK_TASK,
            "interval": every_minute,
            "enabled": True,
            "description": "Creates the report of every schedule whose time has come "
            "(one report per schedule and period, however often this runs).",
        },
    )


def remove_tick(apps, schema_editor):
    apps.get_model("django_celery_beat", "PeriodicTask").objects.filter(name=TICK_NAME).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("reports", "0001_initial"),
        ("django_celery_beat", "0019_alter_periodictasks_options"),
    ]

    operations = [migrations.RunPython(create_tick, remove_tick)]
