"""Arguments are referred to by hash: drop the two columns that repeated them.

``ApprovalVote.edited_arguments`` repeated the request's ``edited_arguments`` (every
live approval covers the request's current arguments; the vote keeps their hash)
and ``ApprovalRequest.approved_arguments_hash`` the hash of the request's approved
arguments, now derived from them (``ApprovalRequest.approved_arguments_hash``).
Existing rows keep working: what the columns held is recomputed from what stays,
and each decision's audit entry still records the hash it approved.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0008_merge_20261201_2137"),
    ]

    operations = [
        migrations.RemoveField(
            model_name="approvalvote",
            name="edited_arguments",
        ),
        migrations.RemoveField(
            model_name="approvalrequest",
            name="approved_arguments_hash",
        ),
    ]
