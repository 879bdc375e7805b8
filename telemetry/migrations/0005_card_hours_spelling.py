"""One spelling of card-hours: `*_card_h` fields become `*_card_hours`."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("telemetry", "0004_step_five_minutes")]

    operations = [
        migrations.RenameField("jobday", old, new)
        for old, new in [
            ("allocated_card_h", "allocated_card_hours"),
            ("active_card_h", "active_card_hours"),
            ("tensor_card_h", "tensor_card_hours"),
            ("idle_card_h", "idle_card_hours"),
        ]
    ]
