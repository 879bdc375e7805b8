"""One spelling of card-hours: the `mtbf_card_h` assumption key becomes `mtbf_card_hours`."""

from django.db import migrations

OLD, NEW = "mtbf_card_h", "mtbf_card_hours"


def _rename_key(apps, schema_editor, old: str, new: str) -> None:
    for name in ("Site", "Cluster", "Pool", "HistoricalSite", "HistoricalCluster", "HistoricalPool"):
        model = apps.get_model("inventory", name)
        for row in model.objects.filter(assumptions__has_key=old).iterator():
            row.assumptions[new] = row.assumptions.pop(old)
            model.objects.filter(pk=row.pk).update(assumptions=row.assumptions)


def forwards(apps, schema_editor):
    _rename_key(apps, schema_editor, OLD, NEW)


def backwards(apps, schema_editor):
    _rename_key(apps, schema_editor, NEW, OLD)


class Migration(migrations.Migration):
    dependencies = [("inventory", "0009_pool_totals_check")]

    operations = [migrations.RunPython(forwards, backwards)]
