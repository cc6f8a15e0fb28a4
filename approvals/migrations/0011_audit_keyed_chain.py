"""Key the audit chain: entries carry the key id of their HMAC, the head its length and mac.

Entries already written keep their plain SHA-256 (``key_id`` empty) and stay
verifiable: ``approvals.auditchain`` accepts them before the first keyed entry,
whose HMAC pins them. The head is anchored here: its length is the number of
entries and its mac is signed with the current audit key (docs/audit.md).
"""

from typing import Any

from django.db import migrations, models


def head_anchor(apps: Any, schema_editor: Any) -> None:
    from approvals.auditchain import head_digest
    from approvals.services.audit import audit_keys

    head_model = apps.get_model("approvals", "AuditChainHead")
    entry_model = apps.get_model("approvals", "AuditEntry")
    head = head_model.objects.filter(pk=1).first()
    length = entry_model.objects.count()
    if head is None or not length:
        return
    keys = audit_keys()
    head.length = length
    head.key_id = next(iter(keys))
    head.mac = head_digest(
        length=length, last_hash=head.last_hash, key_id=head.key_id, keys=keys
    )
    head.save(update_fields=["length", "key_id", "mac"])


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0010_chat_messages'),
    ]

    operations = [
        migrations.AddField(
            model_name='auditchainhead',
            name='key_id',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='auditchainhead',
            name='length',
            field=models.BigIntegerField(default=0),
        ),
        migrations.AddField(
            model_name='auditchainhead',
            name='mac',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.AddField(
            model_name='auditentry',
            name='key_id',
            field=models.CharField(blank=True, default='', max_length=64),
        ),
        migrations.RunPython(head_anchor, migrations.RunPython.noop),
    ]
