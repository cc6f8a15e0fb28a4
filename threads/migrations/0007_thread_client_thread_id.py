"""Threads get a client id, unique per owner; existing threads keep their ids.

Every thread until now had one id, global, which AG-UI clients chose. Each keeps
it as its global id and as its client id, so REST, UI and AG-UI addresses that
worked before still name the same thread.
"""

from django.conf import settings
from django.db import migrations, models
from django.db.models import F


def client_ids_from_global_ids(apps, schema_editor):
    Thread = apps.get_model("threads", "Thread")
    Thread.objects.filter(client_thread_id="").update(client_thread_id=F("thread_id"))


class Migration(migrations.Migration):
    dependencies = [
        ("threads", "0006_run_retry_view_any_thread"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name="thread",
            name="client_thread_id",
            field=models.CharField(blank=True, default="", max_length=200),
        ),
        migrations.RunPython(client_ids_from_global_ids, migrations.RunPython.noop),
        migrations.AddConstraint(
            model_name="thread",
            constraint=models.UniqueConstraint(
                fields=("owner", "client_thread_id"),
                name="uniq_client_thread_id_per_owner",
            ),
        ),
    ]
