"""JSON Patch for STATE_DELTA (RFC 6902, on the ``jsonpatch`` library)."""

from __future__ import annotations

import pytest

from threads.projection import apply_json_patch


def test_patch_applies_to_a_copy() -> None:
    document = {"items": ["a"], "step": 1}
    patched = apply_json_patch(
        document,
        [
            {"op": "add", "path": "/items/-", "value": "b"},
            {"op": "replace", "path": "/step", "value": 2},
            {"op": "copy", "from": "/step", "path": "/was"},
            {"op": "move", "from": "/was", "path": "/moved"},
            {"op": "remove", "path": "/items/0"},
            {"op": "test", "path": "/items/0", "value": "b"},
        ],
    )
    assert patched == {"items": ["b"], "step": 2, "moved": 2}
    assert document == {"items": ["a"], "step": 1}


def test_failed_test_operation_names_the_path() -> None:
    with pytest.raises(ValueError, match="test failed at '/step'"):
        apply_json_patch({"step": 1}, [{"op": "test", "path": "/step", "value": 2}])


@pytest.mark.parametrize(
    "operation",
    [
        {"op": "remove", "path": "/missing"},
        {"op": "replace", "path": "/items/9", "value": 1},
        {"op": "frobnicate", "path": "/step"},
        {"op": "add", "path": "no-slash", "value": 1},
    ],
)
def test_bad_operation_raises_value_error_naming_it(operation: dict) -> None:
    with pytest.raises(ValueError, match="does not apply") as caught:
        apply_json_patch({"step": 1, "items": []}, [operation])
    assert repr(operation["op"]) in str(caught.value)
