"""A pool may name the model it trains or serves (issue #32): ``model_name``, a model catalog
entry (blank: none named, the pool's model_params assumption or the reference workload)."""

from django.db import migrations, models

MODEL_HELP = (
    "Optional: the model the pool trains or serves, by its name in the model catalog (e.g. "
    "DeepSeek-V3). Fills model_params; for a mixture of experts analyses score MFU on its "
    "active parameters and gradient traffic on the weights replicated over data parallelism."
)


def _field() -> models.CharField:
    return models.CharField(blank=True, default="", help_text=MODEL_HELP, max_length=100)


class Migration(migrations.Migration):
    dependencies = [
        ("inventory", "0014_nvlink_domain_and_blackwell_ultra"),
    ]

    operations = [
        migrations.AddField(model_name="pool", name="model_name", field=_field()),
        migrations.AddField(model_name="historicalpool", name="model_name", field=_field()),
    ]
