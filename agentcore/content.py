"""Tool-result content: AG-UI content parts, structured results, size caps and downgrades.

A result is carried as AG-UI JSON: a string, or an ordered list of part dicts
(``{"type": "text", "text": ...}``, ``{"type": "image", "source": {...}}``...), the
shape of ``ag_ui.core`` ``ContentPart`` dumped with camelCase keys and absent fields
omitted. The same value goes into ``TOOL_CALL_RESULT``, the tool message and the
history replayed to a model (TC-10).

This module never imports Django.

Over 400 lines because it holds the content-part models and their
flattening/downgrade rules per provider (TC-10..16), one table each.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import decimal
import enum
import json
import logging
import sys
import uuid
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Final, Literal, TypeAlias, TypeGuard

from agentcore import events as agui

if TYPE_CHECKING:
    from pydantic import BaseModel, TypeAdapter

__all__ = [
    "PART_TYPES",
    "Bounded",
    "Content",
    "ContentError",
    "Downgraded",
    "Flattened",
    "MediaKind",
    "ModelCapabilities",
    "audio_part",
    "content_size",
    "data_source",
    "document_part",
    "drop_unsupported",
    "file_source",
    "flatten_content",
    "image_part",
    "is_part_model",
    "is_pydantic_model",
    "limit_content",
    "media_part",
    "normalize_content",
    "part_adapter",
    "part_dict",
    "serialize_structured",
    "text_part",
    "url_source",
    "video_part",
]

logger = logging.getLogger(__name__)

Content: TypeAlias = str | list[dict[str, Any]]
MediaKind = Literal["image", "audio", "video", "document"]
PART_TYPES: Final = frozenset({"text", "image", "audio", "video", "document"})

#: The media part model's name in ``ag_ui.core`` per kind (models built on first use).
_MEDIA_MODELS: Final[dict[str, str]] = {
    "image": "ImagePart",
    "audio": "AudioPart",
    "video": "VideoPart",
    "document": "DocumentPart",
}
_NOTICE_RESERVE: Final = 160


@cache
def part_adapter() -> TypeAdapter[Any]:
    """Return the validator of one AG-UI ``ContentPart`` (built on first use). Implements TC-10."""
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(agui.ContentPart)
    return adapter


def is_part_model(value: object) -> bool:
    """Return whether ``value`` is an AG-UI content part model (not a dict)."""
    return is_pydantic_model(value) and isinstance(
        value,
        (
            agui.TextPart,
            agui.ImagePart,
            agui.AudioPart,
            agui.VideoPart,
            agui.DocumentPart,
        ),
    )


def is_pydantic_model(value: object) -> TypeGuard[BaseModel]:
    """Return whether ``value`` is a pydantic model instance, importing nothing.

    No instance exists before pydantic is imported, so a process that has not
    imported it answers ``False`` without paying for the import.
    """
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(value, pydantic.BaseModel)


class ContentError(ValueError):
    """A value cannot be a tool result (a malformed part, a non-JSON value)."""


def _dump(model: BaseModel) -> dict[str, Any]:
    """Return an AG-UI model as JSON: camelCase keys, absent fields omitted."""
    return model.model_dump(mode="json", by_alias=True, exclude_none=True)


def text_part(
    text: str, *, metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return a text part dict; ``metadata`` carries what parts don't model (a hit's source). Implements TC-10, TC-12."""
    return _dump(
        agui.TextPart(text=text, metadata=dict(metadata) if metadata else None)
    )


def data_source(data: bytes | str, *, mime_type: str) -> dict[str, Any]:
    """Return an inline source; ``data`` is raw bytes (base64-encoded here) or base64 text. Implements TC-10."""
    value = base64.b64encode(data).decode("ascii") if isinstance(data, bytes) else data
    return _dump(agui.DataSource(value=value, mime_type=mime_type))


def url_source(url: str, *, mime_type: str | None = None) -> dict[str, Any]:
    """Return a URL source, fetched by whoever needs the bytes. Implements TC-10."""
    return _dump(agui.UrlSource(value=url, mime_type=mime_type))


def file_source(
    handle: str, *, provider: str | None = None, mime_type: str | None = None
) -> dict[str, Any]:
    """Return a provider file-handle source; the handle is opaque. Implements TC-10, TC-13."""
    return _dump(agui.FileSource(value=handle, provider=provider, mime_type=mime_type))


def media_part(
    kind: MediaKind,
    source: Mapping[str, Any],
    *,
    metadata: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Return an ``image|audio|video|document`` part dict. Raises :class:`ContentError`. Implements TC-10, TC-12."""
    model_name = _MEDIA_MODELS.get(kind)
    if model_name is None:
        raise ContentError(
            f"unknown media part kind {kind!r}; use one of {sorted(_MEDIA_MODELS)}"
        )
    model: type[BaseModel] = getattr(agui, model_name)
    try:
        part = model.model_validate(
            {"source": dict(source), "metadata": dict(metadata) if metadata else None}
        )
    except agui.ValidationError as error:
        raise ContentError(f"malformed {kind} part: {error}") from error
    return _dump(part)


def image_part(
    source: Mapping[str, Any], *, metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return an image part dict. Implements TC-10."""
    return media_part("image", source, metadata=metadata)


def audio_part(
    source: Mapping[str, Any], *, metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return an audio part dict. Implements TC-10."""
    return media_part("audio", source, metadata=metadata)


def video_part(
    source: Mapping[str, Any], *, metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return a video part dict. Implements TC-10."""
    return media_part("video", source, metadata=metadata)


def document_part(
    source: Mapping[str, Any], *, metadata: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Return a document part dict (a file name goes in ``metadata``). Implements TC-10, TC-12."""
    return media_part("document", source, metadata=metadata)


def part_dict(part: BaseModel | Mapping[str, Any]) -> dict[str, Any]:
    """Validate one part (an ``ag_ui.core`` part model or a dict) and return its JSON dict.

    Raises :class:`ContentError` when it is not a text/image/audio/video/document
    part. Implements TC-10.
    """
    try:
        model = part_adapter().validate_python(
            part if is_pydantic_model(part) else dict(part)
        )
    except agui.ValidationError as error:
        raise ContentError(f"not a content part: {error}") from error
    return _dump(model)


def _json_default(value: Any) -> Any:
    """Encode the non-JSON values tools commonly return."""
    if is_pydantic_model(value):
        return value.model_dump(mode="json")
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    if isinstance(value, decimal.Decimal | uuid.UUID):
        return str(value)
    if isinstance(value, dt.datetime | dt.date | dt.time):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def serialize_structured(value: Any) -> str:
    """Return ``value`` as compact JSON text (no JSON part exists).

    Decimals, UUIDs and datetimes become strings; pydantic models and dataclasses
    their JSON. Raises :class:`ContentError` for anything else. Implements TC-11.
    """
    try:
        return json.dumps(
            value,
            ensure_ascii=False,
            separators=(",", ":"),
            default=_json_default,
            allow_nan=False,
        )
    except (TypeError, ValueError) as error:
        raise ContentError(f"tool result is not JSON-serializable: {error}") from error


def _is_part_like(item: Any) -> bool:
    """Return whether ``item`` looks like a content part (model or dict with a part type)."""
    if is_part_model(item):
        return True
    return isinstance(item, Mapping) and item.get("type") in PART_TYPES


def normalize_content(value: Any) -> Content:
    """Return what a tool returned as AG-UI result content (a string or a list of part dicts).

    A string stays a string; ``None`` becomes ``""``; a list of parts (models or
    dicts) becomes validated part dicts; any other value (dict, list of records,
    number, pydantic model) is serialized to compact JSON text.
    Raises :class:`ContentError`. Implements TC-10, TC-11.
    """
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if _is_part_like(value):
        return [part_dict(value)]
    if (
        isinstance(value, list | tuple)
        and value
        and all(_is_part_like(v) for v in value)
    ):
        return [part_dict(v) for v in value]
    return serialize_structured(value)


def _part_size(part: Mapping[str, Any]) -> int:
    """Return a part's payload size in bytes (text UTF-8, or the source value)."""
    if part.get("type") == "text":
        return len(str(part.get("text", "")).encode("utf-8"))
    source = part.get("source") or {}
    return len(str(source.get("value", "")).encode("utf-8"))


def content_size(content: Content) -> int:
    """Return the payload size of ``content`` in bytes (UTF-8 text plus source values)."""
    if isinstance(content, str):
        return len(content.encode("utf-8"))
    return sum(_part_size(p) for p in content)


@dataclass(frozen=True)
class Bounded:
    """``content`` within the cap, and how many payload bytes were cut (0 = untouched)."""

    content: Content
    truncated_bytes: int = 0
    dropped_parts: int = 0


def _notice(truncated: int, dropped: int = 0) -> str:
    """Return the visible truncation notice."""
    extra = f"; {dropped} part(s) dropped" if dropped else ""
    return (
        f"\n[... {truncated:,} bytes truncated{extra}; narrow the query or request a "
        "range ...]\n"
    )


def _cut_text(text: str, budget: int) -> tuple[str, int]:
    """Return ``head + notice + tail`` of at most ``budget`` bytes, cut on UTF-8 boundaries."""
    data = text.encode("utf-8")
    if len(data) <= budget:
        return text, 0
    room = max(budget - len(_notice(len(data)).encode("utf-8")), 0)
    head = data[: room // 2].decode("utf-8", errors="ignore")
    tail_bytes = room - room // 2
    tail = (
        data[len(data) - tail_bytes :].decode("utf-8", errors="ignore")
        if tail_bytes
        else ""
    )
    kept = len(head.encode("utf-8")) + len(tail.encode("utf-8"))
    truncated = len(data) - kept
    return head + _notice(truncated) + tail, truncated


def limit_content(content: Content, max_bytes: int) -> Bounded:
    """Return ``content`` capped at ``max_bytes`` payload bytes, with a visible notice.

    A string keeps its head and tail around ``[... N bytes truncated; ...]``; the
    whole result, notice included, fits in ``max_bytes``. In a part list, parts are
    kept in order while they fit, the first text part that overflows is cut, media
    parts that do not fit are dropped, and a text part with the notice is appended.
    Implements LP-05 (maximum result size), TC-10.
    """
    if content_size(content) <= max_bytes:
        return Bounded(content)
    if isinstance(content, str):
        text, truncated = _cut_text(content, max_bytes)
        return Bounded(text, truncated)
    budget = max(max_bytes - _NOTICE_RESERVE, 0)
    kept: list[dict[str, Any]] = []
    truncated = 0
    dropped = 0
    for part in content:
        size = _part_size(part)
        if size <= budget:
            kept.append(part)
            budget -= size
        elif part.get("type") == "text" and budget > 0:
            data = str(part.get("text", "")).encode("utf-8")
            head = data[:budget].decode("utf-8", errors="ignore")
            kept.append({**part, "text": head})
            truncated += len(data) - len(head.encode("utf-8"))
            budget -= len(head.encode("utf-8"))
        else:
            truncated += size
            dropped += 1
    kept.append(text_part(_notice(truncated, dropped).strip("\n")))
    return Bounded(kept, truncated, dropped)


@dataclass(frozen=True)
class Flattened:
    """A part list rendered as text for a string-only consumer.

    ``dropped`` lists the part types left out, in order; ``warning`` announces the
    loss (``None`` when nothing was dropped).
    """

    text: str
    dropped: tuple[str, ...] = ()

    @property
    def warning(self) -> str | None:
        """Return the sentence announcing dropped parts, or ``None``."""
        if not self.dropped:
            return None
        return (
            f"flattening the tool result dropped {len(self.dropped)} non-text part(s): "
            f"{', '.join(self.dropped)}"
        )


def flatten_content(content: Content) -> Flattened:
    """Return the text parts of ``content`` concatenated in order; other parts are dropped.

    No placeholder marks where a part was; a warning is logged (and returned) when
    anything was dropped. Implements TC-15, TC-16.
    """
    if isinstance(content, str):
        return Flattened(content)
    texts: list[str] = []
    dropped: list[str] = []
    for part in content:
        if part.get("type") == "text":
            texts.append(str(part.get("text", "")))
        else:
            dropped.append(str(part.get("type")))
    result = Flattened("".join(texts), tuple(dropped))
    if result.warning:
        logger.warning("%s", result.warning)
    return result


@dataclass(frozen=True)
class ModelCapabilities:
    """Which parts a model (or a provider's tool results) can take.

    ``kinds``: accepted part types (text is always accepted). ``sources``: accepted
    source types. ``file_provider``: the provider whose file handles are usable; a
    handle naming another provider is dropped. ``mime_types``: per kind, the accepted
    MIME types (absent kind = any).
    """

    kinds: frozenset[str] = frozenset({"text"})
    sources: frozenset[str] = frozenset({"data", "url", "file"})
    file_provider: str | None = None
    mime_types: Mapping[str, Collection[str]] = field(default_factory=dict)

    def accepts(self, part: Mapping[str, Any]) -> bool:
        """Return whether ``part`` can be sent as-is. Implements TC-14."""
        kind = part.get("type")
        if kind == "text":
            return True
        if kind not in self.kinds:
            return False
        source = part.get("source") or {}
        if source.get("type") not in self.sources:
            return False
        if source.get("type") == "file":
            issuer = source.get("provider")
            if issuer and self.file_provider and issuer != self.file_provider:
                return False
        allowed = self.mime_types.get(str(kind))
        mime = source.get("mimeType")
        return not (allowed is not None and mime is not None and mime not in allowed)


@dataclass(frozen=True)
class Downgraded:
    """Content with the unusable parts removed, and the parts removed."""

    content: Content
    dropped: tuple[dict[str, Any], ...] = ()


def drop_unsupported(content: Content, capabilities: ModelCapabilities) -> Downgraded:
    """Drop the parts ``capabilities`` cannot take; the call is still answered.

    Never raises for an unusable part; a list whose parts were all dropped answers
    with ``""``. A string is returned unchanged. Implements TC-14.
    """
    if isinstance(content, str):
        return Downgraded(content)
    kept = [p for p in content if capabilities.accepts(p)]
    dropped = tuple(p for p in content if not capabilities.accepts(p))
    if dropped:
        logger.info(
            "dropped %d tool-result part(s) the model cannot take: %s",
            len(dropped),
            ", ".join(str(p.get("type")) for p in dropped),
        )
    return Downgraded(kept if kept else "", dropped)
