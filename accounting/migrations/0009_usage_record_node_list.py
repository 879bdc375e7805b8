from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("accounting", "0008_gres_alias_per_cluster"),
    ]

    operations = [
        migrations.AddField(
            model_name="usagerecord",
            name="node_list",
            field=models.TextField(
                blank=True,
                help_text="Slurm NodeList (hostlist); joins jobs with GPU telemetry.",
            ),
        ),
    ]
