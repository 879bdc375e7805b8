# The task delivery ledger moved here from the config package. It is transient bookkeeping
# (rows live while a task runs), so the old table is dropped rather than copied.

from django.db import migrations, models


class Migration(migrations.Migration):
    initial = True

    dependencies = []

    operations = [
        migrations.RunSQL("DROP TABLE IF EXISTS config_taskdelivery", migrations.RunSQL.noop),
        migrations.CreateModel(
            name="TaskDelivery",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                (
                    "key",
                    models.CharField(
                        help_text="sha256 of task name and args", max_length=64, unique=True
                    ),
                ),
                ("task_name", models.CharField(max_length=200)),
                ("args", models.CharField(blank=True, max_length=500)),
                ("unfinished", models.PositiveIntegerField(default=0)),
                ("last_started_at", models.DateTimeField()),
            ],
            options={
                "verbose_name_plural": "task deliveries",
            },
        ),
    ]
