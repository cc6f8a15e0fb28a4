"""axe-core (``tests/js`` npm package ``axe-core`` 4.14) run on a Playwright page.

The engine is injected with ``page.evaluate`` (as ``@axe-core/playwright`` does),
which runs outside the page's Content-Security-Policy, so the pages keep their
strict ``script-src``. Rules: WCAG 2.0/2.1/2.2 levels A and AA plus axe's
best practices.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from tests.js_packages import ensure_js_package

AXE_TAGS = (
    "wcag2a",
    "wcag2aa",
    "wcag21a",
    "wcag21aa",
    "wcag22aa",
    "best-practice",
)

_RUN = """async ([context, tags]) => {
  const results = await window.axe.run(context === null ? document : context, {
    runOnly: {type: "tag", values: tags},
    resultTypes: ["violations"],
  });
  return results.violations.map((violation) => ({
    id: violation.id,
    impact: violation.impact,
    help: violation.help,
    nodes: violation.nodes.map((node) => ({
      target: node.target.map((part) => Array.isArray(part) ? part.join(" >>> ") : part),
      summary: node.failureSummary || "",
    })),
  }));
}"""


@cache
def axe_source() -> str:
    """Return the text of ``axe.min.js``, running ``npm ci`` in ``tests/js`` if needed."""
    return (ensure_js_package("axe-core") / "axe.min.js").read_text(encoding="utf-8")


def axe_violations(page: Any, *, context: Any = None) -> list[dict[str, Any]]:
    """Run axe on ``page`` (or ``context``: a CSS selector or an axe context object).

    Returns a list of ``{"id", "impact", "help", "nodes": [{"target": [selector,
    ...], "summary"}]}``, empty when the page passes. The engine is injected once
    per document (again after a navigation).
    """
    if not page.evaluate("() => typeof window.axe === 'object'"):
        page.evaluate(axe_source())
    return list(page.evaluate(_RUN, [context, list(AXE_TAGS)]))


def format_violations(violations: list[dict[str, Any]]) -> str:
    """Return one line per violation (id, impact, help) and one per failing node."""
    lines = []
    for violation in violations:
        lines.append(f"{violation['id']} ({violation['impact']}): {violation['help']}")
        for node in violation["nodes"]:
            summary = " ".join(node["summary"].split())
            lines.append(f"    {', '.join(node['target'])}  {summary[:300]}")
    return "\n".join(lines)


def assert_no_axe_violations(page: Any, *, context: Any = None) -> None:
    """Fail listing each axe violation's id, impact and targets on ``page``.

    ``context`` narrows the run to part of the page (a CSS selector string or an
    axe context object such as ``{"exclude": ["#x"]}``); ``None`` checks the
    whole document. Raises ``AssertionError`` naming the page's URL and every
    violation.
    """
    violations = axe_violations(page, context=context)
    assert not violations, (
        f"axe-core found {len(violations)} violation(s) on {page.url}:\n"
        + format_violations(violations)
    )
