# The worker pulse (core/jobs/pulse.py): when a worker last ran the pulse beat sends.

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0001_task_delivery_ledger"),
    ]

    operations = [
        migrations.CreateModel(
            name="WorkerPulse",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "hostname",
                    models.CharField(help_text="Celery's node name.", max_length=255, unique=True),
                ),
                ("consumed_at", models.DateTimeField()),
            ],
        ),
    ]
