"""Tests for tool-result content: parts, structured results, size caps, flattening and downgrades (TC-10..TC-16)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import logging
from decimal import Decimal

import pytest
from ag_ui.core import ImagePart, TextPart, ToolCallResultEvent, ToolMessage, UrlSource
from pydantic import BaseModel

from agentcore.content import (
    ContentError,
    ModelCapabilities,
    audio_part,
    content_size,
    data_source,
    document_part,
    drop_unsupported,
    file_source,
    flatten_content,
    image_part,
    limit_content,
    media_part,
    normalize_content,
    part_dict,
    serialize_structured,
    text_part,
    url_source,
    video_part,
)

PNG = data_source(b"\x89PNG fake", mime_type="image/png")


def test_tc10_every_part_kind_and_source() -> None:
    """TC-10: text, image, audio, video and document parts with data, URL and file sources."""
    parts = [
        text_part("hello"),
        image_part(PNG),
        audio_part(url_source("https://example.com/a.mp3", mime_type="audio/mpeg")),
        video_part(file_source("file-abc", provider="openai", mime_type="video/mp4")),
        document_part(url_source("https://example.com/r.pdf")),
    ]
    assert [p["type"] for p in parts] == ["text", "image", "audio", "video", "document"]
    assert parts[1]["source"] == {
        "type": "data",
        "value": base64.b64encode(b"\x89PNG fake").decode(),
        "mimeType": "image/png",
    }
    assert parts[2]["source"] == {
        "type": "url",
        "value": "https://example.com/a.mp3",
        "mimeType": "audio/mpeg",
    }
    assert parts[4]["source"] == {"type": "url", "value": "https://example.com/r.pdf"}
    # The same list is valid tool message and TOOL_CALL_RESULT content, unchanged.
    message = ToolMessage(id="m", tool_call_id="c", content=parts)
    event = ToolCallResultEvent(message_id="m", tool_call_id="c", content=parts)
    dumped = message.model_dump(mode="json", by_alias=True, exclude_none=True)[
        "content"
    ]
    assert dumped == parts
    assert (
        event.model_dump(mode="json", by_alias=True, exclude_none=True)["content"]
        == parts
    )


def test_tc10_malformed_part_is_refused() -> None:
    """TC-10: a media part without a valid source is refused."""
    with pytest.raises(ContentError):
        media_part("image", {"type": "data", "value": "x"})  # no mimeType
    with pytest.raises(ContentError):
        media_part("hologram", PNG)  # type: ignore[arg-type]
    with pytest.raises(ContentError):
        part_dict({"type": "image", "source": {"type": "ftp", "value": "x"}})


def test_tc10_normalize_parts_from_models_and_dicts() -> None:
    """TC-10: part models and dicts become validated part dicts; strings stay strings."""
    content = normalize_content(
        [TextPart(text="a"), {"type": "image", "source": {"type": "url", "value": "u"}}]
    )
    assert content == [
        {"type": "text", "text": "a"},
        {"type": "image", "source": {"type": "url", "value": "u"}},
    ]
    assert normalize_content("plain") == "plain"
    assert normalize_content(None) == ""
    assert normalize_content(ImagePart(source=UrlSource(value="u"))) == [
        {"type": "image", "source": {"type": "url", "value": "u"}}
    ]


class Order(BaseModel):
    order_id: str
    total: Decimal


def test_tc11_structured_results_are_compact_json_text() -> None:
    """TC-11: there is no JSON part; structured results become compact JSON strings."""
    assert normalize_content({"a": 1, "b": [1, 2]}) == '{"a":1,"b":[1,2]}'
    assert normalize_content([{"sku": "x"}]) == '[{"sku":"x"}]'
    assert normalize_content(42) == "42"
    assert normalize_content(Order(order_id="A", total=Decimal("2.50"))) == (
        '{"order_id":"A","total":"2.50"}'
    )
    assert serialize_structured({"when": dt.date(2025, 1, 2), "é": "ü"}) == (
        '{"when":"2025-01-02","é":"ü"}'
    )
    with pytest.raises(ContentError):
        serialize_structured({"x": object()})
    with pytest.raises(ContentError):
        serialize_structured({"x": float("nan")})


def test_tc12_metadata_carries_what_parts_do_not_model() -> None:
    """TC-12: a hit's source and title, a document's file name live in metadata."""
    hit = text_part("Result text", metadata={"source": "https://x", "title": "X"})
    doc = document_part(PNG, metadata={"filename": "report.pdf"})
    content = normalize_content([hit, doc])
    assert content[0]["metadata"] == {"source": "https://x", "title": "X"}
    assert content[1]["metadata"] == {"filename": "report.pdf"}


def test_tc13_file_handles_are_opaque() -> None:
    """TC-13: an uploaded output is returned as a file source, kept byte for byte."""
    handle = "gs://weird/Path?with=query&x=1#frag"
    part = image_part(file_source(handle, provider="google"))
    assert normalize_content([part])[0]["source"] == {
        "type": "file",
        "value": handle,
        "provider": "google",
    }


# --- size cap (LP-05, BC27) -----------------------------------------------------------


def test_bc27_result_too_large_is_cut_with_visible_notice() -> None:
    """BC27, LP-05: a 3 MB result keeps head and tail around a truncation notice, within 64 KiB."""
    cap = 64 * 1024
    text = "H" * 1_000_000 + "M" * 1_000_000 + "T" * 1_000_000
    bounded = limit_content(text, cap)
    out = bounded.content
    assert isinstance(out, str)
    assert len(out.encode("utf-8")) <= cap
    assert out.startswith("HHHH")
    assert out.endswith("TTTT")
    kept = len(text) - bounded.truncated_bytes
    notice = f"\n[... {bounded.truncated_bytes:,} bytes truncated; narrow the query or request a range ...]\n"
    assert notice in out
    assert out == "H" * (kept // 2) + notice + "T" * (kept - kept // 2)
    assert bounded.truncated_bytes == 3_000_000 - kept


def test_bc27_cut_on_utf8_boundaries() -> None:
    """BC27: the cut never splits a multi-byte character."""
    text = "é" * 10_000 + "🙂" * 10_000
    bounded = limit_content(text, 1001)
    out = bounded.content
    assert isinstance(out, str)
    assert len(out.encode("utf-8")) <= 1001
    out.encode("utf-8")  # no surrogates or broken characters
    assert out.startswith("é")
    assert out.endswith("🙂")
    assert "\ufffd" not in out


def test_lp05_small_result_is_untouched() -> None:
    """LP-05: a result within the cap is returned unchanged."""
    assert limit_content("abc", 256).content == "abc"
    assert limit_content("abc", 256).truncated_bytes == 0
    parts = [text_part("a"), image_part(PNG)]
    assert limit_content(parts, 1024).content == parts


def test_lp05_part_list_over_cap_drops_media_and_notices() -> None:
    """LP-05: in a part list, what does not fit is cut or dropped and a notice part is added."""
    big_image = image_part(data_source(b"x" * 3000, mime_type="image/png"))
    parts = [text_part("intro"), big_image, text_part("y" * 5000)]
    bounded = limit_content(parts, 1024)
    content = bounded.content
    assert isinstance(content, list)
    assert content[0] == text_part("intro")
    assert all(p["type"] == "text" for p in content)
    assert bounded.dropped_parts == 1
    assert "bytes truncated; 1 part(s) dropped" in content[-1]["text"]
    assert content_size(content) <= 1024


# --- flattening (TC-15, TC-16) ---------------------------------------------------------


def test_tc15_flatten_concatenates_text_parts_in_order(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """TC-15, TC-16: text parts in order, others dropped, no placeholders, a warning."""
    parts = [text_part("Hello, "), image_part(PNG), text_part("world"), audio_part(PNG)]
    with caplog.at_level(logging.WARNING, logger="agentcore.content"):
        flat = flatten_content(parts)
    assert flat.text == "Hello, world"
    assert flat.dropped == ("image", "audio")
    assert flat.warning
    assert "dropped 2 non-text part(s): image, audio" in flat.warning
    assert "dropped 2" in caplog.text
    assert "[" not in flat.text
    assert "image" not in flat.text


def test_tc16_flatten_without_drops_is_silent(caplog: pytest.LogCaptureFixture) -> None:
    """TC-16: nothing dropped, no warning."""
    with caplog.at_level(logging.WARNING, logger="agentcore.content"):
        flat = flatten_content([text_part("a"), text_part("b")])
    assert flat.text == "ab"
    assert flat.dropped == ()
    assert flat.warning is None
    assert caplog.text == ""
    assert flatten_content("plain").text == "plain"


# --- dropping what a model cannot take (TC-14) ----------------------------------------


def test_tc14_text_only_model_drops_media_but_answers() -> None:
    """TC-14: an image for a text-only model is dropped; the call still gets its text."""
    parts = [text_part("chart:"), image_part(PNG)]
    out = drop_unsupported(parts, ModelCapabilities())
    assert out.content == [text_part("chart:")]
    assert [p["type"] for p in out.dropped] == ["image"]


def test_tc14_all_parts_dropped_answers_empty_string() -> None:
    """TC-14: a result whose parts were all dropped answers with ""."""
    out = drop_unsupported([image_part(PNG), audio_part(PNG)], ModelCapabilities())
    assert out.content == ""
    assert len(out.dropped) == 2


def test_tc14_other_providers_file_handle_and_unsupported_audio_are_dropped() -> None:
    """TC-14: another provider's file handle, or audio a provider refuses in results, is dropped."""
    caps = ModelCapabilities(
        kinds=frozenset({"text", "image", "document"}),
        file_provider="anthropic",
        mime_types={"image": {"image/png", "image/jpeg"}},
    )
    parts = [
        image_part(file_source("file-1", provider="openai")),
        image_part(file_source("file_2", provider="anthropic")),
        image_part(file_source("file_3")),
        image_part(data_source(b"x", mime_type="image/webp")),
        audio_part(PNG),
        document_part(PNG),
    ]
    out = drop_unsupported(parts, caps)
    assert [p["source"].get("value") for p in out.content] == [
        "file_2",
        "file_3",
        PNG["value"],
    ]
    assert len(out.dropped) == 3
    assert drop_unsupported("text stays", caps).content == "text stays"


def test_tc14_string_results_pass_through() -> None:
    """TC-14: a string result is never touched."""
    assert drop_unsupported("", ModelCapabilities()).content == ""
    assert json.loads(serialize_structured({"a": 1})) == {"a": 1}
