"""``/favicon.ico`` (requested by browsers on their own) leads to the UI's favicon.svg."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders

pytestmark = pytest.mark.django_db


def test_favicon_ico_redirects_to_the_svg_without_a_login(client):
    answer = client.get("/favicon.ico")

    assert answer.status_code == 302
    assert answer["Location"] == "/static/ui/favicon.svg"
    found = finders.find("ui/favicon.svg")
    assert found is not None
    assert Path(found).read_text().lstrip().startswith("<svg")


def test_favicon_ico_takes_only_get(client):
    assert client.post("/favicon.ico").status_code == 405
