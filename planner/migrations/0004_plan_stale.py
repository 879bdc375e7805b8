"""Plans become stale when the inventory they used changes: the flag and what it references."""

from django.db import migrations, models

REF_COLUMNS = {
    "site": "site_id",
    "cluster": "cluster_id",
    "pool": "pool_id",
    "accelerator": "accelerator_id",
}


def refs_from_snapshots(apps, schema_editor):
    """Existing plans reference what their last run's option rows name."""
    Plan = apps.get_model("planner", "Plan")
    for plan in Plan.objects.exclude(input_snapshot=None).only("pk", "input_snapshot"):
        rows = (plan.input_snapshot or {}).get("options") or []
        refs = {
            level: sorted({int(row[column]) for row in rows if row.get(column) is not None})
            for level, column in REF_COLUMNS.items()
        }
        Plan.objects.filter(pk=plan.pk).update(inventory_refs=refs)


class Migration(migrations.Migration):
    dependencies = [("planner", "0003_plan")]

    operations = [
        migrations.AddField(
            model_name="plan",
            name="stale",
            field=models.BooleanField(
                default=False,
                help_text="A site, cluster, pool, node group or card model the plan used "
                "changed after its last successful run began.",
            ),
        ),
        migrations.AddField(
            model_name="plan",
            name="inventory_changed_at",
            field=models.DateTimeField(
                blank=True,
                null=True,
                help_text="When an inventory edit last touched the plan's inputs.",
            ),
        ),
        migrations.AddField(
            model_name="plan",
            name="inventory_refs",
            field=models.JSONField(
                blank=True,
                default=dict,
                help_text='Inventory ids the options use: {"site": [..], "cluster": [..], '
                '"pool": [..], "accelerator": [..]} (what an edit must touch to make the plan '
                "stale).",
            ),
        ),
        migrations.RunPython(refs_from_snapshots, migrations.RunPython.noop),
    ]
