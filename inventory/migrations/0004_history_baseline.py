"""A baseline history entry for objects that existed before history began.

Without it the first edit of such an object would have no "before" to diff against or
revert to.
"""

from django.db import migrations
from django.utils import timezone

MODELS = ["Site", "AcceleratorModel", "Cluster", "Pool", "NodeGroup"]


def add_baseline(apps, schema_editor):
    now = timezone.now()
    for name in MODELS:
        model = apps.get_model("inventory", name)
        historical = apps.get_model("inventory", f"Historical{name}")
        attnames = [f.attname for f in model._meta.concrete_fields]
        already = set(historical.objects.values_list("id", flat=True).distinct())
        historical.objects.bulk_create(
            [
                historical(
                    **{a: getattr(obj, a) for a in attnames},
                    history_date=now,
                    history_type="+",
                    history_change_reason="State when history began",
                )
                for obj in model.objects.exclude(pk__in=already).iterator()
            ],
            batch_size=500,
        )


class Migration(migrations.Migration):
    dependencies = [("inventory", "0003_history")]

    operations = [migrations.RunPython(add_baseline, migrations.RunPython.noop)]
