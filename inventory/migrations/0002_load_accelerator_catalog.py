"""Load the card catalog from the fixture the project owns (figures from the shared spec)."""

from django.db import migrations


def load(apps, schema_editor):
    from inventory.catalog import load_catalog

    load_catalog(apps.get_model("inventory", "AcceleratorModel"))


class Migration(migrations.Migration):
    dependencies = [("inventory", "0001_initial")]

    operations = [migrations.RunPython(load, migrations.RunPython.noop)]
