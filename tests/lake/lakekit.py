"""Shared constants of the lake tests (a plain module: tests/lake is not a package, so that its
name cannot shadow the real ``lake`` package)."""

from __future__ import annotations

import datetime as dt

UTC = dt.timezone.utc
START = dt.datetime(2024, 5, 1, 10, tzinfo=UTC)
CLUSTER = "syn"


def hhmm(h: int, m: int) -> dt.datetime:
    return dt.datetime(2024, 5, 1, h, m, tzinfo=UTC)


def clock_at(t: dt.datetime):
    return lambda: t.timestamp()
