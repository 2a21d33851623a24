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


#: What Spark and Delta say when a query reads a table or folder of the lake that is not there
#: (yet): a young lake whose first ingest or rollup has not committed.
MISSING_TABLE_ERRORS = (
    "DELTA_TABLE_NOT_FOUND",
    "DELTA_MISSING_DELTA_TABLE",
    "DELTA_EMPTY_DIRECTORY",
    "DELTA_PATH_DOES_NOT_EXIST",
    "PATH_NOT_FOUND",
    "UNABLE_TO_INFER_SCHEMA",
)


def missing_table(exc: BaseException) -> bool:
    """Did a query fail (``exc``, or an error it was raised from) because a lake table does not
    exist yet, rather than because of a bug or of Spark itself?  Spark names the condition only
    in its message (an ``AnalysisException`` of classic PySpark or of Spark Connect)."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if any(code in str(e) for code in MISSING_TABLE_ERRORS):
            return True
        e = e.__cause__ or e.__context__
    return False
