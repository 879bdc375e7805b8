"""Cards whose autodetected Slurm gres names are common on real clusters (A100 PCIe 40GB, L40,
GH200, RTX 2080 Ti, MI100, MI210): added to the catalog; existing rows are left as edited."""

from django.db import migrations


def add_missing_cards(apps, schema_editor):
    from inventory.catalog import load_catalog

    load_catalog(apps.get_model("inventory", "AcceleratorModel"))


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0007_accelerator_dense_int8_tops"),
    ]

    operations = [migrations.RunPython(add_missing_cards, migrations.RunPython.noop)]
