"""Small conversions from what the client libraries hand back (enums, ints, TopicPartition
objects, CamelCase states) to the plain values ``live.model`` holds."""

from __future__ import annotations

import re
from collections.abc import Iterable

from confluent_kafka.admin import ConfigSource  # type: ignore[attr-defined]  # re-exported without __all__


def tp_list(topic_partitions: Iterable[object]) -> list[tuple[str, int]]:
    """(topic, partition) pairs from pairs or from objects with ``topic`` and ``partition``
    (either library's TopicPartition)."""
    out = []
    for tp in topic_partitions:
        if isinstance(tp, (tuple, list)) and len(tp) == 2:
            out.append((str(tp[0]), int(tp[1])))
        elif hasattr(tp, "topic") and hasattr(tp, "partition"):
            out.append((str(tp.topic), int(tp.partition)))
        else:
            raise TypeError(f"expected (topic, partition) pairs, got {tp!r}")
    return out


def enum_name(value: object) -> str:
    return getattr(value, "name", None) or str(value)


def snake(state: str) -> str:
    """'PreparingRebalance' -> 'PREPARING_REBALANCE' (group states as confluent names them)."""
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "_", state).upper()


def config_source(value: object) -> str:
    """ConfigEntry.source arrives as a plain int from the C extension."""
    if isinstance(value, int) and not isinstance(value, ConfigSource):
        try:
            return ConfigSource(value).name
        except ValueError:
            return str(value)
    return enum_name(value)
