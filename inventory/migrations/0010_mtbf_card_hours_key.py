"""One spelling of card-hours: the `mtbf_card_h*` assumption keys become `mtbf_card_hours*`."""

from django.db import migrations

KEYS = [
    (f"mtbf_card_h{suffix}", f"mtbf_card_hours{suffix}")
    for suffix in ("", "_production", "_research", "_hopper", "_ampere")
]


def _rename_key(apps, schema_editor, old: str, new: str) -> None:
    for name in ("Site", "Cluster", "Pool", "HistoricalSite", "HistoricalCluster", "HistoricalPool"):
        model = apps.get_model("inventory", name)
        for row in model.objects.filter(assumptions__has_key=old).iterator():
            row.assumptions[new] = row.assumptions.pop(old)
            model.objects.filter(pk=row.pk).update(assumptions=row.assumptions)


def forwards(apps, schema_editor):
    for old, new in KEYS:
        _rename_key(apps, schema_editor, old, new)


def backwards(apps, schema_editor):
    for old, new in KEYS:
        _rename_key(apps, schema_editor, new, old)


class Migration(migrations.Migration):
    dependencies = [("inventory", "0009_pool_totals_check")]

    operations = [migrations.RunPython(forwards, backwards)]
