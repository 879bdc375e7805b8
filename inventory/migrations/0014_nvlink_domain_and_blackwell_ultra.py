"""The cards' NVLink (scale-up) domain, and the Blackwell Ultra and newer AMD cards (issues
27 and 32).

Schema: ``nvlink_domain_cards``, the cards that share one NVLink / Infinity Fabric domain
(blank: unknown, the node is the domain). Data: existing catalog rows get the fixture's domain
where they have none (edits kept), and the cards the catalog lacked are added from the fixture,
whose ``note`` column cites each figure. Their sources:

- GB200 NVL72: https://www.nvidia.com/en-us/data-center/gb200-nvl72/
- GB300 NVL72: https://www.nvidia.com/en-us/data-center/gb300-nvl72/
- B300 (HGX B300): https://www.nvidia.com/en-us/data-center/hgx/ and, per GPU,
  https://verda.com/blog/gb300-nvl72-architecture
- MI325X: https://www.amd.com/en/products/accelerators/instinct/mi300/mi325x.html
- MI355X: https://www.amd.com/en/products/accelerators/instinct/mi350/mi355x.html

Reversing drops the column; the added cards stay (as 0008's do): usage, telemetry and
aliases may point at them by then, and deleting a card cascades or nulls those rows.
"""

import django.core.validators
from django.db import migrations, models

DOMAIN_HELP = (
    "Cards that share one NVLink / Infinity Fabric scale-up domain (8 on an HGX or OAM board, "
    "72 on a GB200/GB300 NVL72 rack); blank when unknown: the node is the domain."
)


def fill_domains_and_add_cards(apps, schema_editor):
    """Fixture domains where a row has none; missing fixture cards created (edits kept)."""
    from inventory.catalog import catalog_rows, load_catalog

    accelerator_model = apps.get_model("inventory", "AcceleratorModel")
    for row in catalog_rows():
        if row["nvlink_domain_cards"] is not None:
            accelerator_model.objects.filter(name=row["name"], nvlink_domain_cards=None).update(
                nvlink_domain_cards=row["nvlink_domain_cards"]
            )
    load_catalog(accelerator_model)


def _field() -> models.PositiveIntegerField:
    return models.PositiveIntegerField(
        blank=True,
        help_text=DOMAIN_HELP,
        null=True,
        validators=[
            django.core.validators.MinValueValidator(1),
            django.core.validators.MaxValueValidator(576),
        ],
        verbose_name="NVLink domain (cards)",
    )


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0013_accelerator_dense_fp4_tflops"),
    ]

    operations = [
        migrations.AddField(
            model_name="acceleratormodel", name="nvlink_domain_cards", field=_field()
        ),
        migrations.AddField(
            model_name="historicalacceleratormodel", name="nvlink_domain_cards", field=_field()
        ),
        migrations.RunPython(fill_domains_and_add_cards, migrations.RunPython.noop),
    ]
