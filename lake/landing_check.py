"""Landing-file checks, vectorised: the same verdict as the per-line Python check, much faster.

Why
---
Every landing line is checked before a batch is committed (:func:`check_row`: a JSON
object, the field types and ranges).  Done one ``json.loads`` at a time, that check was most of
an ingest round at the issue's scale (1,000,000 lines, ~140 MB per file: ~4.7 s a file), so
:func:`scan_fast` parses and checks whole blocks of lines with pyarrow instead.

What the fast path checks
-------------------------
Each block of whole lines is parsed by ``pyarrow.json.read_json`` with an explicit schema for
the seven scalar fields (``labels`` is left to inference: Arrow's JSON reader cannot convert to
a map) and then checked with ``pyarrow.compute``:

* layout: every line is exactly one JSON object (``{`` at each line start, ``}`` at each line
  end, as many rows as lines): no blank lines, arrays, bare values, NaN/Infinity lines, ``\\r``;
* the bytes are valid UTF-8 (Arrow keeps invalid bytes in its strings without complaint);
* no field outside the eight (an inferred extra column), ``ts`` an int64 in 2000..2100,
  ``cluster``/``metric`` non-empty strings, ``broker`` in -1..2^31-1, ``topic`` null or a
  non-empty string, ``partition`` null or 0..2^31-1, ``labels`` null or an object whose values
  are all strings, ``value`` a finite number well inside the double range.

Arrow refuses most wrong JSON types by itself (``true``, ``"5"`` or ``1.0`` for an int field, a
number for a string field, duplicate keys), and reads ``NaN``/``Infinity`` as doubles, which the
finiteness check catches.

The parsed rows, staged for Spark
---------------------------------
The blocks Arrow parsed for the check are the file's rows already.  With ``stage=`` a good
file's blocks are also written, in order, to a Parquet file with the columns and types Spark
reads a landing line as (``lake.ingest.landing_schema``; ``labels`` as a map of strings), so the
ingest's Spark job reads that instead of parsing the JSON a second time (Spark's JSON reader was
the largest part of a commit: about 1 s of a core per 300,000 rows).  Only the fast path stages:
a file the reference decides is not staged, and Spark reads its JSON as before.

Any doubt falls back
--------------------
Whenever the fast path sees a problem, is unsure (a case Arrow reads differently from
``json.loads``), or pyarrow raises, :func:`scan_fast` returns what :func:`scan_python` (the
reference: ``json.loads`` and ``check_row`` line by line) says instead.  A malformed file's
reason text is therefore exactly the reference's, and a file is accepted by the fast path only
when the reference would accept it with the same rows and minutes.  Bad files are rare, so only
good files need to be fast.
"""

from __future__ import annotations

import json
import math
import os
from collections import deque
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj
import pyarrow.parquet as pq

# A block is parsed as ONE Arrow JSON block: with several blocks per read_json call Arrow
# unifies the inferred ``labels`` types across them and raises on null-then-object (a block of
# broker rows, then one of group-lag rows), which would send such files to the slow reference.  Parsing a block takes several times its size in
# transient memory; at 4 MiB a 140 MB file peaks at ~1.5x its size in all, as fast as 16 MiB.
_CHUNK_BYTES = 4 << 20
# read_json and numpy release the GIL: blocks are checked on several cores at once.
_WORKERS = max(1, min(4, os.cpu_count() or 1))

_INT32 = 2**31 - 1
# sample times must be plausible epoch microseconds (catches seconds/millis mix-ups)
_TS_MIN = 946_684_800_000_000  # 2000-01-01
_TS_MAX = 4_102_444_800_000_000  # 2100-01-01
_VALUE_MAX = 1.7e308
# check_row rejects |value| > 1.7e308 on the exact (possibly int) value; an integer literal just
# above 1.7e308 rounds to a double that is not, so values this close go to the reference.
_VALUE_SAFE = 1.6e308
_US_PER_MINUTE = 60_000_000
_NL, _LBRACE, _RBRACE, _LBRACKET = b"\n"[0], b"{"[0], b"}"[0], b"["[0]
# far above a good line's 2, far below the depth that overflows Arrow's parser stack
_MAX_OPENS_PER_LINE = 16

_FIELDS = frozenset(("ts", "cluster", "broker", "metric", "topic", "partition", "labels", "value"))
_SCHEMA = pa.schema(
    [
        ("ts", pa.int64()),
        ("cluster", pa.string()),
        # int64, not int32: the range is checked here, so that 2^31 is a verdict, not an Arrow error
        ("broker", pa.int64()),
        ("metric", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int64()),
        ("value", pa.float64()),
    ]
)
# "infer", not "error": it is how ``labels`` gets read at all; an unknown field shows up as an
# extra column, which the checks refuse.
_PARSE = pj.ParseOptions(explicit_schema=_SCHEMA, unexpected_field_behavior="infer")
# The keys the reference lets be null, and how the collectors write such a null (see _labels_ok).
_NULLABLE_KEYS = frozenset(("topic", "partition", "labels"))
_EXPLICIT_NULLS = tuple(b'%s"%s":null' % (lead, k.encode()) for k in sorted(_NULLABLE_KEYS) for lead in (b",", b"{"))

Minutes = set[tuple[str, int]]
Scan = tuple[int, str | None, Minutes]

#: A staged landing file's columns: a landing line as Spark reads it (``lake.ingest.landing_schema``).
LABELS_TYPE = pa.map_(pa.string(), pa.string())
STAGE_SCHEMA = pa.schema(
    [
        ("ts", pa.int64()),
        ("cluster", pa.string()),
        ("broker", pa.int32()),
        ("metric", pa.string()),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("labels", LABELS_TYPE),
        ("value", pa.float64()),
    ]
)


# --------------------------------------------------------------------------- the reference


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_row(obj: object) -> str | None:
    """Why a parsed landing line is not a lake row, or None when it is one."""
    if not isinstance(obj, dict):
        return "not a JSON object"
    extra = set(obj) - _FIELDS
    if extra:
        return f"unknown field(s) {sorted(extra)}"
    ts = obj.get("ts")
    if not _is_int(ts) or not _TS_MIN <= ts < _TS_MAX:
        return f"ts must be epoch microseconds (2000..2100), got {ts!r}"
    for key in ("cluster", "metric"):
        v = obj.get(key)
        if not isinstance(v, str) or not v:
            return f"{key} must be a non-empty string, got {v!r}"
    broker = obj.get("broker")
    if not _is_int(broker) or not -1 <= broker <= _INT32:
        return f"broker must be a node id (or -1), got {broker!r}"
    topic = obj.get("topic")
    if topic is not None and (not isinstance(topic, str) or not topic):
        return f"topic must be a string or null, got {topic!r}"
    part = obj.get("partition")
    if part is not None and (not _is_int(part) or not 0 <= part <= _INT32):
        return f"partition must be a non-negative int or null, got {part!r}"
    labels = obj.get("labels")
    if labels is not None and (
        not isinstance(labels, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in labels.items())
    ):
        return "labels must be an object of strings or null"
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return f"value must be a finite number, got {value!r}"
    # an int beyond a double: math.isfinite would raise OverflowError on it
    if _is_int(value) and abs(value) > _VALUE_MAX:
        return "value out of range"
    if not math.isfinite(value):
        return f"value must be a finite number, got {value!r}"
    if abs(value) > _VALUE_MAX:
        return "value out of range"
    return None


def scan_python(path: Path) -> Scan:
    """The reference: ``json.loads`` and :func:`check_row` line by line.

    ``(rows, None, minutes)`` for a good file, ``(0, reason, set())`` for a malformed one;
    ``minutes`` are the ``(cluster, minute start in epoch seconds)`` the rows fall in.
    """
    rows = 0
    minutes: Minutes = set()
    try:
        with open(path, "rb") as f:
            for n, raw in enumerate(f, 1):
                if not raw.strip():
                    continue
                try:
                    obj = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
                except (UnicodeDecodeError, ValueError) as exc:
                    return 0, f"line {n}: not valid JSON: {exc}", set()
                except RecursionError:
                    return 0, f"line {n}: not valid JSON: nested too deeply", set()
                why = check_row(obj)
                if why is not None:
                    return 0, f"line {n}: {why}", set()
                rows += 1
                minutes.add((obj["cluster"], obj["ts"] // _US_PER_MINUTE * 60))
    except OSError as exc:
        return 0, f"cannot read: {exc}", set()
    return rows, None, minutes


def scan_fast(path: Path, *, chunk_bytes: int = _CHUNK_BYTES, stage: Path | None = None) -> Scan:
    """What :func:`scan_python` returns for ``path``, computed with pyarrow when the file is good.

    A file the fast path cannot vouch for (malformed, or merely unusual) is scanned by the
    reference, so the verdict and the reason text are always the reference's.

    ``stage``: where to write a good file's rows as Parquet (:data:`STAGE_SCHEMA`, atomically:
    the file exists complete or not at all) when the fast path accepted it with rows; any file
    already there is removed first, so after the call ``stage`` exists exactly when it holds
    this file's rows.
    """
    if stage is not None:
        stage.unlink(missing_ok=True)
    try:
        verdict = _scan_arrow(path, chunk_bytes, stage)
    except Exception:  # whatever pyarrow raises is a doubt: the reference decides
        verdict = None
    if verdict is None:
        return scan_python(path)
    rows, minutes = verdict
    return rows, None, minutes


# --------------------------------------------------------------------------- the fast path


def _scan_arrow(path: Path, chunk_bytes: int, stage: Path | None = None) -> tuple[int, Minutes] | None:
    """(rows, minutes) when every block passes, None at the first doubt.  With ``stage``, a
    good file's rows are written there (see :func:`scan_fast`)."""
    rows = 0
    minutes: Minutes = set()
    pending: deque[Future[tuple[int, Minutes, pa.Table | None] | None]] = deque()
    tmp = None if stage is None else stage.with_name(f".{stage.name}.tmp")
    writer: pq.ParquetWriter | None = None

    def drain(keep: int) -> bool:
        nonlocal rows, writer
        while len(pending) > keep:
            part = pending.popleft().result()
            if part is None:
                return False
            rows += part[0]
            minutes.update(part[1])
            if tmp is not None and part[2] is not None:
                if writer is None:
                    writer = pq.ParquetWriter(tmp, STAGE_SCHEMA, compression="none")
                writer.write_table(part[2])
        return True

    done = False
    try:
        with open(path, "rb") as f, ThreadPoolExecutor(_WORKERS) as pool:
            try:
                for chunk in _line_chunks(f, chunk_bytes):
                    pending.append(pool.submit(_check_chunk, chunk, tmp is not None))
                    if not drain(_WORKERS):  # a few blocks in memory at a time, not the file
                        return None
                if not drain(0):
                    return None
            finally:
                for fut in pending:  # after a doubt, the blocks still queued are moot
                    fut.cancel()
        if writer is not None:
            writer.close()
            writer = None
            os.replace(tmp, stage)  # type: ignore[arg-type]  # both set when a writer was
        done = True
    finally:
        if writer is not None:
            writer.close()
        if tmp is not None and not done:
            tmp.unlink(missing_ok=True)
    return rows, minutes


def _line_chunks(f: IO[bytes], chunk_bytes: int) -> Iterator[bytes]:
    """Blocks of whole lines, each ending with ``\\n`` (a missing last newline is added: the
    reference reads a last line without one the same way)."""
    carry = b""
    while True:
        block = f.read(chunk_bytes)
        if not block:
            break
        buf = carry + block if carry else block
        cut = buf.rfind(b"\n") + 1
        if cut == 0:  # a line longer than a block: keep reading
            carry = buf
            continue
        yield buf[:cut]
        carry = buf[cut:]
    if carry:
        yield carry + b"\n"


def _check_chunk(chunk: bytes, stage: bool = False) -> tuple[int, Minutes, pa.Table | None] | None:
    """(rows, minutes, the rows as :data:`STAGE_SCHEMA` when ``stage``) of a block of whole lines
    that is certainly good, else None."""
    lines = _plain_lines(chunk)
    if lines is None:
        return None
    # Arrow keeps invalid UTF-8 inside strings as is; the reference decodes each line strictly.
    if not chunk.isascii():
        try:
            chunk.decode("utf-8")
        except UnicodeDecodeError:
            return None
    # one block per call (see _CHUNK_BYTES); the pool supplies the parallelism
    opts = pj.ReadOptions(use_threads=False, block_size=len(chunk) + 1)
    table = pj.read_json(pa.BufferReader(chunk), read_options=opts, parse_options=_PARSE)
    if table.num_rows != lines or not set(table.column_names) <= _FIELDS:
        return None
    if not _columns_ok(table) or not _labels_ok(table, chunk):
        return None
    minute = pc.multiply(pc.divide(table.column("ts"), _US_PER_MINUTE), 60)  # ts > 0: truncation is floor
    pairs = pa.table({"c": table.column("cluster"), "m": minute}).group_by(["c", "m"]).aggregate([])
    staged = _as_staged(table) if stage else None
    return lines, set(zip(pairs.column("c").to_pylist(), pairs.column("m").to_pylist())), staged


def _as_staged(table: pa.Table) -> pa.Table:
    """A checked block as :data:`STAGE_SCHEMA`: the int columns narrowed (their ranges are
    checked), ``labels`` from Arrow's inferred struct of strings to a map (a key a line lacks
    is no entry: explicit nulls never pass the check)."""
    n = table.num_rows
    labels = table.column("labels") if "labels" in table.column_names else None
    cols = [
        table.column("ts"),
        table.column("cluster"),
        table.column("broker").cast(pa.int32()),
        table.column("metric"),
        table.column("topic"),
        table.column("partition").cast(pa.int32()),
        _labels_map(labels, n),
        table.column("value"),
    ]
    return pa.Table.from_arrays(cols, schema=STAGE_SCHEMA)


def _labels_map(labels: pa.ChunkedArray | None, n: int) -> pa.Array:
    """Arrow's inferred ``labels`` (absent, all null, or a struct of strings) as a map array."""
    if labels is None or pa.types.is_null(labels.type):
        return pa.nulls(n, LABELS_TYPE)
    struct = labels.combine_chunks()
    names = [f.name for f in struct.type]
    children = struct.flatten()  # null wherever the object is null, too
    present = np.zeros((n, len(children)), dtype=bool)
    for j, child in enumerate(children):
        present[:, j] = child.is_valid().to_numpy(zero_copy_only=False)
    offsets = np.zeros(n + 1, dtype=np.int32)
    np.cumsum(present.sum(axis=1), out=offsets[1:])
    rows, fields = np.nonzero(present)  # row-major: each object's entries in field order
    keys = pa.array(np.array(names, dtype=object)[fields] if names else [], pa.string())
    if children:
        items = pc.take(pa.concat_arrays(children), pa.array(fields.astype(np.int64) * n + rows))
    else:
        items = pa.array([], pa.string())
    mask = pc.invert(struct.is_valid())
    return pa.MapArray.from_arrays(pa.array(offsets), keys, items, type=LABELS_TYPE, mask=mask)


def _plain_lines(chunk: bytes) -> int | None:
    """How many lines ``chunk`` has when each is one JSON object, shallow; None when unsure.

    Checked before Arrow sees the bytes: read_json segfaults (pyarrow 26) on a line that is
    only ``null`` and on nesting some thousands deep.  With ``{`` at every line start and ``}``
    at every end, a line holds one or more whole top-level values (a raw newline cannot sit in
    a JSON string, and ``{`` after a nested ``}`` is a syntax error); Arrow makes a row of each
    value (``null`` too) or fails, so as many rows as lines means one object per line, which is
    what json.loads needs.  Blank lines, ``\\r\\n``, spaces around a line: legal, never written
    by the collectors, left to the reference.
    """
    a = np.frombuffer(chunk, np.uint8)
    nl = np.flatnonzero(a == _NL)
    lines = len(nl)
    if not lines or a[0] != _LBRACE or nl[-1] != len(a) - 1:
        return None
    if not (a[nl - 1] == _RBRACE).all() or not (a[nl[:-1] + 1] == _LBRACE).all():
        return None
    # A line of n brackets nests at most n deep; a good line has one or two ({ and labels' {).
    # Per line only when the block's total leaves room for a deep one.
    is_open = (a == _LBRACE) | (a == _LBRACKET)
    if int(np.count_nonzero(is_open)) - lines > _MAX_OPENS_PER_LINE:
        per_line = np.bincount(np.searchsorted(nl, np.flatnonzero(is_open)), minlength=lines)
        if int(per_line.max()) > _MAX_OPENS_PER_LINE:
            return None
    return lines


def _min_max(col: pa.ChunkedArray) -> tuple[Any, Any]:
    mm = pc.min_max(col)
    return mm["min"].as_py(), mm["max"].as_py()


def _in_range(col: pa.ChunkedArray, lo: int, hi: int) -> bool:
    """Non-null values all in lo..hi (True when there are none)."""
    low, high = _min_max(col)
    return low is None or (lo <= low and high <= hi)


def _non_empty(col: pa.ChunkedArray) -> bool:
    """Non-null strings all non-empty."""
    low, _ = _min_max(pc.binary_length(col))
    return low is None or low > 0


def _columns_ok(table: pa.Table) -> bool:
    # A null in a required column is a missing field or an explicit null: the reference rejects
    # both.  In topic/partition both are accepted, so their nulls need no telling apart.
    for name in ("ts", "cluster", "broker", "metric", "value"):
        if table.column(name).null_count:
            return False
    if not _in_range(table.column("ts"), _TS_MIN, _TS_MAX - 1):
        return False
    if not _in_range(table.column("broker"), -1, _INT32) or not _in_range(table.column("partition"), 0, _INT32):
        return False
    if not all(_non_empty(table.column(name)) for name in ("cluster", "metric", "topic")):
        return False
    value = table.column("value")
    # Arrow reads NaN/Infinity/Inf (which json.loads refuses) and huge integer literals as
    # non-finite doubles
    if not pc.all(pc.is_finite(value)).as_py():
        return False
    _, high = _min_max(pc.abs(value))
    return high is None or high < _VALUE_SAFE


def _labels_ok(table: pa.Table, chunk: bytes) -> bool:
    if "labels" not in table.column_names:
        return True
    labels = table.column("labels")
    if pa.types.is_null(labels.type):  # every labels present is null
        return True
    # an inferred struct of strings; anything else (numbers, bools, nested objects, arrays, a
    # string labels, timestamp[s] inferred from date-like strings) goes to the reference
    if not pa.types.is_struct(labels.type):
        return False
    if any(f.type != pa.string() for f in labels.type.fields):
        return False
    children = labels.flatten()  # each child null where labels itself is null, too
    if all(child.null_count == labels.null_count for child in children):
        return True
    # Some object lacks a key another one has - or holds it with an explicit null, which the
    # reference rejects: Arrow shows both as null.  Tell them apart in the bytes: every
    # ``null`` must be one of the collector's explicit ``"topic":null``, ``"partition":null`` or
    # ``"labels":null``.  Such a match is a key of that name (its quote is unescaped, being
    # after ``,`` or ``{``), top-level or inside labels: a labels key of one of those names is
    # left to the reference.  A ``null`` inside a string only makes the count larger.
    if {f.name for f in labels.type.fields} & _NULLABLE_KEYS:
        return False
    return chunk.count(b"null") == sum(chunk.count(pattern) for pattern in _EXPLICIT_NULLS)
