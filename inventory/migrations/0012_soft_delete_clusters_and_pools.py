# Soft delete of clusters and pools (inventory.deletion): deleted_at, names unique among live rows.

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('inventory', '0011_assumptions_help_text'),
    ]

    operations = [
        migrations.AlterModelOptions(
            name='cluster',
            options={'default_manager_name': 'objects', 'ordering': ['site__name', 'name']},
        ),
        migrations.AlterModelOptions(
            name='nodegroup',
            options={'default_manager_name': 'objects', 'ordering': ['pool', 'name']},
        ),
        migrations.AlterModelOptions(
            name='pool',
            options={'default_manager_name': 'objects', 'ordering': ['cluster__site__name', 'cluster__name', 'name']},
        ),
        migrations.RemoveConstraint(
            model_name='cluster',
            name='cluster_name_unique_per_site',
        ),
        migrations.RemoveConstraint(
            model_name='pool',
            name='pool_name_unique_per_cluster',
        ),
        migrations.AddField(
            model_name='cluster',
            name='deleted_at',
            field=models.DateTimeField(blank=True, db_index=True, editable=False, help_text='When it was deleted; hidden until restored or purged.', null=True),
        ),
        migrations.AddField(
            model_name='historicalcluster',
            name='deleted_at',
            field=models.DateTimeField(blank=True, db_index=True, editable=False, help_text='When it was deleted; hidden until restored or purged.', null=True),
        ),
        migrations.AddField(
            model_name='historicalpool',
            name='deleted_at',
            field=models.DateTimeField(blank=True, db_index=True, editable=False, help_text='When it was deleted; hidden until restored or purged.', null=True),
        ),
        migrations.AddField(
            model_name='pool',
            name='deleted_at',
            field=models.DateTimeField(blank=True, db_index=True, editable=False, help_text='When it was deleted; hidden until restored or purged.', null=True),
        ),
        migrations.AddConstraint(
            model_name='cluster',
            constraint=models.UniqueConstraint(condition=models.Q(('deleted_at__isnull', True)), fields=('site', 'name'), name='cluster_name_unique_per_site', violation_error_message='A cluster of this name already exists at this site.'),
        ),
        migrations.AddConstraint(
            model_name='pool',
            constraint=models.UniqueConstraint(condition=models.Q(('deleted_at__isnull', True)), fields=('cluster', 'name'), name='pool_name_unique_per_cluster', violation_error_message='A pool of this name already exists in this cluster.'),
        ),
    ]
