"""Flatten knowledge-base models into plain text, for search indexing and completeness checks."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel

from .loader import KnowledgeBase


def iter_strings(value: object) -> Iterator[str]:
    """Every string inside a model, list or dict, keys of dicts included (config names live there)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, BaseModel):
        for name in type(value).model_fields:
            yield from iter_strings(getattr(value, name))
    elif isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from iter_strings(v)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from iter_strings(item)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        yield str(value)


def kb_text(kb: KnowledgeBase, only: str | None = None) -> str:
    """All text of the KB, or of one failure mode / reference file when ``only`` names it."""
    parts: list[object] = []
    if only is None:
        parts = [*kb.failure_modes.values(), *kb.reference.values()]
    elif only in kb.failure_modes:
        parts = [kb.failure_modes[only]]
    else:
        parts = [kb.reference[only]]
    return "\n".join(s for part in parts for s in iter_strings(part))
