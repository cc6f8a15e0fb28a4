"""The verifiable audit chain: keyed entries, the head, verify, export and offline checking (SEC-04)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from django.apps import apps
from django.core.exceptions import ImproperlyConfigured
from django.core.management import call_command
from django.core.management.base import CommandError

from approvals import auditchain
from approvals.models import AuditChainHead, AuditEntry
from approvals.services import audit_append, audit_export, audit_keys, audit_verify

pytestmark = pytest.mark.django_db

KEYS = "2026-12:first-secret-0123456789"


@pytest.fixture
def keyed(settings):
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "AUDIT_KEYS": KEYS}


@pytest.fixture
def three(keyed, user) -> list[AuditEntry]:
    """Three entries appended by the service, in chain order."""
    for action in ("approval.requested", "approval.approved", "execution.succeeded"):
        audit_append(actor=user, action=action, target=user, after={"n": action})
    return list(AuditEntry.objects.order_by("id"))


def _bundle(tmp_path: Path) -> Path:
    output = tmp_path / "audit.zip"
    call_command("audit_export", output=str(output))
    return output


def _verify_offline(
    bundle: Path, keys: str | None = KEYS
) -> subprocess.CompletedProcess[str]:
    """Run the bundle's own verify.py in an isolated Python without site-packages (no Django)."""
    folder = bundle.parent / "unpacked"
    with zipfile.ZipFile(bundle) as archive:
        archive.extractall(folder)
    env = {"PATH": os.environ.get("PATH", "")}
    if keys is not None:
        env[auditchain.KEYS_ENV] = keys
    return subprocess.run(
        [sys.executable, "-I", "-S", str(folder / "verify.py"), str(bundle)],
        capture_output=True,
        text=True,
        env=env,
        timeout=30,
        check=False,
    )


def test_entries_are_hmac_keyed_and_the_head_counts_them(three):
    """Each entry names its key and carries the HMAC, not a bare SHA-256; the head signs its length."""
    assert [e.key_id for e in three] == ["2026-12"] * 3
    first = three[0].chain_fields()
    assert three[0].hash == auditchain.entry_digest(
        first, key_id="2026-12", keys={"2026-12": "first-secret-0123456789"}
    )
    assert three[0].hash != auditchain.entry_digest(first, key_id="", keys={})
    head = AuditChainHead.objects.get()
    assert (head.length, head.last_hash, head.key_id) == (3, three[-1].hash, "2026-12")
    result = audit_verify()
    assert (result.ok, result.entries) == (True, 3)


def test_tail_deletion_is_detected_without_another_append(three):
    """Deleting the newest entry breaks verification at once, naming the missing position."""
    AuditEntry.objects.filter(pk=three[-1].pk).delete()
    result = audit_verify()
    assert result.entries == 2
    assert result.first_broken is not None
    assert result.first_broken.entry_id is None
    assert result.first_broken.position == 3
    assert "records 3 entries but the chain ends after 2" in result.first_broken.reason


def test_tail_deletion_hidden_by_rewriting_the_head_is_detected(three):
    """Moving the head back to the previous entry without the key leaves its mac wrong."""
    AuditEntry.objects.filter(pk=three[-1].pk).delete()
    AuditChainHead.objects.filter(pk=1).update(length=2, last_hash=three[1].hash)
    link = audit_verify().first_broken
    assert link is not None
    assert "mac does not match" in link.reason


def test_a_rewritten_entry_is_the_first_broken_link(three):
    """Changing an entry's content (even recomputing a plain SHA-256) is caught at that entry."""
    forged = three[1].chain_fields()
    forged["after"] = {"n": "approval.rejected"}
    AuditEntry.objects.filter(pk=three[1].pk).update(
        after=forged["after"],
        hash=auditchain.entry_digest(forged, key_id="", keys={}),
        key_id="",
    )
    link = audit_verify().first_broken
    assert link is not None
    assert (link.entry_id, link.position) == (three[1].pk, 2)
    assert link.reason == "it carries no key id although earlier entries do"

    AuditEntry.objects.filter(pk=three[1].pk).update(key_id="2026-12")
    link = audit_verify().first_broken
    assert link is not None
    assert (link.entry_id, link.reason) == (
        three[1].pk,
        "its hash does not match its content: it was rewritten",
    )


def test_an_entry_deleted_in_the_middle_breaks_the_next_link(three):
    AuditEntry.objects.filter(pk=three[1].pk).delete()
    link = audit_verify().first_broken
    assert link is not None
    assert (link.entry_id, link.position) == (three[2].pk, 2)
    assert "prev_hash is not the previous entry's hash" in link.reason


def test_rotation_keeps_old_entries_verifiable_while_the_old_key_is_listed(
    three, settings, user
):
    """A new current key signs new entries; dropping the old key names it as missing."""
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "AUDIT_KEYS": {
            "2027-01": "second-secret-abcdef",
            "2026-12": "first-secret-0123456789",
        },
    }
    audit_append(actor=user, action="approval.expired", target=user)
    assert AuditEntry.objects.order_by("-id").first().key_id == "2027-01"
    assert audit_verify().ok
    settings.COUNTERSIGN = {
        **settings.COUNTERSIGN,
        "AUDIT_KEYS": "2027-01:second-secret-abcdef",
    }
    link = audit_verify().first_broken
    assert link is not None
    assert (link.entry_id, link.position) == (three[0].pk, 1)
    assert "key '2026-12', which is not among the keys given" in link.reason


def test_entries_written_before_keying_verify_and_the_migration_anchors_the_head(
    keyed, user
):
    """Legacy SHA-256 entries stay valid before keyed ones once the head is anchored."""
    from importlib import import_module

    migration = import_module("approvals.migrations.0011_audit_keyed_chain")
    previous = auditchain.GENESIS
    for n in range(2):
        entry = AuditEntry(
            actor_label="system",
            action=f"legacy.{n}",
            target_type="auth.user",
            target_id=str(user.pk),
            after={"n": n},
            created_at=user.date_joined,
            prev_hash=previous,
        )
        entry.hash = auditchain.entry_digest(entry.chain_fields(), key_id="", keys={})
        entry.save()
        previous = entry.hash
    AuditChainHead.objects.create(pk=1, last_hash=previous)
    migration.head_anchor(apps, None)
    assert audit_verify().ok
    audit_append(actor=user, action="keyed", target=user)
    result = audit_verify()
    assert (result.ok, result.entries) == (True, 3)


def test_default_key_is_secret_key_and_malformed_keys_are_refused(settings):
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "AUDIT_KEYS": ""}
    settings.SECRET_KEY = "s3cret-for-the-test"
    assert audit_keys() == {"secret-key": "s3cret-for-the-test"}
    for bad, named in (
        ("no-colon", "'no-colon' needs the form id:secret"),
        (":secret", "needs the form id:secret"),
        ("a:1,a:2", "audit key id 'a' is given twice"),
    ):
        settings.COUNTERSIGN = {**settings.COUNTERSIGN, "AUDIT_KEYS": bad}
        with pytest.raises(ImproperlyConfigured, match=named):
            audit_keys()
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "AUDIT_KEYS": 42}
    with pytest.raises(
        ImproperlyConfigured, match=r"a dict or 'id:secret,\.\.\.', not int"
    ):
        audit_keys()


def test_audit_verify_command_reports_intact_and_the_first_broken_link(three, capsys):
    call_command("audit_verify")
    assert capsys.readouterr().out.strip() == "audit chain intact: 3 entries"
    AuditEntry.objects.filter(pk=three[-1].pk).delete()
    with pytest.raises(CommandError) as raised:
        call_command("audit_verify")
    assert raised.value.returncode == 1
    assert str(raised.value).startswith(
        "audit chain broken at position 3 (chain head): the head records 3 entries"
    )


def test_exported_bundle_verifies_offline_and_shows_tampering(three, tmp_path):
    """The bundle's verify.py (no Django: python -I -S) checks it with the key alone."""
    bundle = _bundle(tmp_path)
    with zipfile.ZipFile(bundle) as archive:
        assert sorted(archive.namelist()) == [
            "VERIFY.md",
            "entries.jsonl",
            "head.json",
            "verify.py",
        ]
        lines = archive.read("entries.jsonl").decode().splitlines()
        head = json.loads(archive.read("head.json"))
        assert "first-secret" not in archive.read("entries.jsonl").decode()
    assert [json.loads(line)["action"] for line in lines] == [
        "approval.requested",
        "approval.approved",
        "execution.succeeded",
    ]
    assert head["length"] == 3
    done = _verify_offline(bundle)
    assert (done.returncode, done.stdout.strip()) == (
        0,
        f"intact: 3 entries, head {three[-1].hash}",
    )

    # A rewritten entry in the bundle: the first broken link, exit 1.
    tampered = tmp_path / "tampered" / "audit.zip"
    tampered.parent.mkdir()
    rows = [json.loads(line) for line in lines]
    rows[0]["actor"] = "someone-else"
    with zipfile.ZipFile(tampered, "w") as archive:
        archive.writestr("entries.jsonl", "\n".join(json.dumps(r) for r in rows))
        archive.writestr("head.json", json.dumps(head))
        archive.writestr(
            "verify.py", (bundle.parent / "unpacked" / "verify.py").read_text()
        )
    done = _verify_offline(tampered)
    assert done.returncode == 1
    assert done.stdout.strip() == (
        f"BROKEN at position 1 (entry id {three[0].pk}): its hash does not match "
        "its content: it was rewritten"
    )

    # A wrong key is a broken chain, no key is a usage error.
    assert _verify_offline(bundle, keys="2026-12:wrong").returncode == 1
    missing = _verify_offline(bundle, keys=None)
    assert (missing.returncode, missing.stderr.strip()) == (
        2,
        "set COUNTERSIGN_AUDIT_KEYS=id:secret[,id:secret…]",
    )


def test_export_refuses_an_existing_file_or_missing_folder(three, tmp_path):
    existing = tmp_path / "a.zip"
    existing.write_text("keep me")
    with pytest.raises(CommandError, match="exists; name a new file"):
        call_command("audit_export", output=str(existing))
    assert existing.read_text() == "keep me"
    with pytest.raises(CommandError, match="does not exist"):
        call_command("audit_export", output=str(tmp_path / "no" / "a.zip"))
    assert audit_export(output=tmp_path / "b.zip") == 3


def test_offline_verifier_rejects_unreadable_bundles(tmp_path):
    (tmp_path / "junk.zip").write_text("not a zip")
    assert auditchain.main([str(tmp_path / "junk.zip")]) == 2
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "entries.jsonl").write_text('{"id": 1\n')
    (tmp_path / "d" / "head.json").write_text("null")
    assert auditchain.main([str(tmp_path / "d")]) == 2


def test_chain_verify_reports_malformed_entries_without_raising():
    keys = {"k": "s"}
    assert auditchain.chain_verify(
        [{"id": 1, "prev_hash": auditchain.GENESIS, "key_id": "k"}],
        head=None,
        keys=keys,
    ).first_broken == auditchain.BrokenLink(
        1, 1, "its content is incomplete or not JSON"
    )
    assert auditchain.chain_verify([], head=None, keys=keys).ok
    assert auditchain.chain_verify(
        [], head={"length": "3", "last_hash": "x", "key_id": "k", "mac": "m"}, keys=keys
    ).first_broken == auditchain.BrokenLink(
        None, 0, "the chain head's mac does not match: rewritten"
    )


def test_admin_page_names_the_first_broken_link(
    three, admin_client, client, staff_user
):
    url = "/admin/approvals/auditentry/verify/"
    page = admin_client.get(url)
    assert page.status_code == 200
    assert "Intact:</strong> 3 entries" in page.content.decode()
    assert url in admin_client.get("/admin/approvals/auditentry/").content.decode()
    AuditEntry.objects.filter(pk=three[1].pk).update(target_id="999")
    text = admin_client.get(url).content.decode()
    assert "Broken</strong> at position 2" in text
    assert f'href="/admin/approvals/auditentry/{three[1].pk}/change/"' in text
    # Staff without view_auditentry may not run it.
    client.force_login(staff_user)
    assert client.get(url).status_code == 403


def test_system_checks_name_malformed_keys_and_warn_on_deploy_without_keys(settings):
    from approvals.checks import check_audit_keys, check_audit_keys_deploy

    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "AUDIT_KEYS": "k1"}
    [error] = check_audit_keys()
    assert error.id == "approvals.E110"
    assert "'k1' needs the form id:secret" in error.msg
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "AUDIT_KEYS": ""}
    assert check_audit_keys() == []
    assert [w.id for w in check_audit_keys_deploy()] == ["approvals.W111"]
    settings.COUNTERSIGN = {**settings.COUNTERSIGN, "AUDIT_KEYS": KEYS}
    assert check_audit_keys() == []
    assert check_audit_keys_deploy() == []
