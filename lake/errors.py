"""The lake's own errors.  Callers above the lake (commands/) translate them into their
vocabulary; nothing under lake/ or spark_queries/ imports from commands/."""

from __future__ import annotations


class LakeError(RuntimeError):
    """Something about the lake itself went wrong (configuration, jars, table)."""


class LakeUnavailable(LakeError):
    """The lake cannot answer now: Spark did not start, is still starting, went away, or the
    query ran past its time limit (and was cancelled).  The message is for a human."""


class LakeTimeout(LakeUnavailable):
    """The query ran past its time limit; its Spark jobs were cancelled."""


class BadRetention(LakeError, ValueError):
    """KBOT_LAKE_RETENTION could not be read."""
