"""The axe helper itself: it finds a known violation and passes a clean page.

Both pages are static HTML served by Playwright's ``set_content`` under a strict
Content-Security-Policy (``script-src 'none'``), the way the product's pages
forbid inline scripts, so the test also proves the injection survives a CSP.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.ui.axe import assert_no_axe_violations, axe_violations

CLEAN = """<!doctype html><html lang="en"><head><title>Clean</title>
<meta http-equiv="Content-Security-Policy" content="script-src 'none'"></head>
<body><main><h1>Clean page</h1><p>Text.</p></main></body></html>"""

BROKEN = """<!doctype html><html lang="en"><head><title>Broken</title>
<meta http-equiv="Content-Security-Policy" content="script-src 'none'"></head>
<body><main><h1>Broken page</h1><h4>Skipped levels</h4>
<img src="data:image/gif;base64,R0lGODlhAQABAAAAACw=" id="no-alt">
<p style="color:#777;background:#888">Low contrast</p></main></body></html>"""


@pytest.fixture
def page(browser: Any) -> Any:
    context = browser.new_context(viewport={"width": 800, "height": 600})
    yield context.new_page()
    context.close()


def test_axe_passes_a_clean_page(page):
    page.set_content(CLEAN)
    assert axe_violations(page) == []
    assert_no_axe_violations(page)


def test_axe_lists_each_violation_id_impact_and_target(page):
    page.set_content(BROKEN)
    with pytest.raises(AssertionError) as failure:
        assert_no_axe_violations(page)
    message = str(failure.value)
    assert "image-alt (critical)" in message
    assert "#no-alt" in message
    assert "heading-order (moderate)" in message
    assert "color-contrast (serious)" in message
    ids = {violation["id"] for violation in axe_violations(page)}
    assert {"image-alt", "heading-order", "color-contrast"} <= ids


def test_axe_context_narrows_the_run(page):
    page.set_content(BROKEN)
    ids = {v["id"] for v in axe_violations(page, context={"exclude": [["#no-alt"]]})}
    assert "image-alt" not in ids
    assert "heading-order" in ids
