"""The vectorised landing-file check (lake.landing_check.scan_fast) gives exactly the reference's
verdict (scan_python: json.loads and lake.ingest.check_row line by line), reason text included,
on good files and on every kind of malformed one, pyarrow's silent coercions among them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lake.landing_check import scan_fast, scan_python

TS = 1_714_557_600_000_000  # 2024-05-01T10:00:00Z in micros
MINUTE = 1_714_557_600  # its minute start, epoch seconds
TS_MIN = 946_684_800_000_000  # 2000-01-01
TS_MAX = 4_102_444_800_000_000  # 2100-01-01


def row(**changes: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "ts": TS,
        "cluster": "dev",
        "broker": 1,
        "topic": "orders",
        "partition": 3,
        "labels": None,
        "metric": "LogEndOffset",
        "value": 1234.0,
    }
    base.update(changes)
    return base


def line(**changes: Any) -> str:
    return json.dumps(row(**changes), separators=(",", ":"))


def raw(text: str) -> str:
    """A good line with ``"labels":null`` replaced by raw JSON text (for what json.dumps cannot write)."""
    return line().replace('"labels":null', text)


GOOD = line()


def without(key: str) -> str:
    d = row()
    del d[key]
    return json.dumps(d, separators=(",", ":"))


def write(tmp_path: Path, content: str | bytes, name: str = "f.jsonl") -> Path:
    p = tmp_path / name
    with open(p, "wb") as f:
        f.write(content.encode("utf-8", "surrogatepass") if isinstance(content, str) else content)
    return p


def outcome(fn: Any, p: Path, **kw: Any) -> Any:
    """The result; an exception (json.loads' RecursionError and check_row's OverflowError were
    raised once, which would have stopped an ingest round instead of quarantining the file) fails."""
    return fn(p, **kw)


def lines(*ls: str) -> str:
    return "".join(x + "\n" for x in ls)


# (name, file content) that the reference accepts
GOOD_FILES: list[tuple[str, str | bytes]] = [
    ("one row", lines(GOOD)),
    ("collector rows", lines(*(line(partition=p, value=float(p)) for p in range(50)))),
    ("broker -1", lines(line(broker=-1))),
    ("broker int32 max", lines(line(broker=2**31 - 1))),
    ("topic and partition null", lines(line(topic=None, partition=None))),
    ("optional fields missing", lines(without("topic"), without("partition"), without("labels"))),
    ("partition 0 and int32 max", lines(line(partition=0), line(partition=2**31 - 1))),
    ("ts at the bounds", lines(line(ts=TS_MIN), line(ts=TS_MAX - 1))),
    ("int value", lines(line(value=5), line(value=-(2**70)))),
    ("value -0 and subnormal", lines(GOOD.replace("1234.0", "-0"), line(value=5e-324))),
    ("value tiny literal", lines(GOOD.replace("1234.0", "1e-400"))),
    ("labels object", lines(line(labels={"group": "g1"}))),
    ("labels null then objects", lines(GOOD, GOOD, line(labels={"group": "g1"}), line(labels={"group": "g2"}))),
    ("labels differing keys", lines(line(labels={"a": "x"}), line(labels={"b": "y"}), GOOD, without("labels"))),
    ("labels empty object", lines(line(labels={}))),
    ("labels empty key and value", lines(line(labels={"": ""}))),
    ("labels date-like value", lines(line(labels={"day": "2024-05-01"}), line(labels={"day": "2024-05-02"}))),
    ("labels key named topic", lines(line(labels={"topic": "x"}), line(labels={"other": "y"}))),
    ("labels value says null", lines(line(labels={"a": "null"}), line(labels={"b": "x"}))),
    ("non-ASCII strings", lines(line(cluster="prod-é", metric="Größe", labels={"ключ": "值"}))),
    ("escaped non-ASCII", lines(raw('"labels":{"k":"\\u00e9\\ud83d\\ude00"}'))),
    ("NUL escape in a string", lines(line(cluster="a\u0000b"))),
    ("lone surrogate escape", lines(GOOD.replace('"dev"', '"\\ud800"'))),
    ("escaped key name", lines(GOOD.replace('"ts"', '"t\\u0073"'))),
    ("escapes in strings", lines(line(metric='a"b\\c/\n\t'))),
    ("duplicate key, last one good", lines(GOOD.replace('"ts":', '"ts":"x","ts":'))),
    ("value just inside 1.7e308", lines(line(value=1.65e308), line(value=-1.7e308))),
    ("no trailing newline", GOOD + "\n" + GOOD),
    ("empty file", ""),
    ("only blank lines", "\n\n   \n\t\n"),
    ("blank lines between", "\n" + GOOD + "\n\n   \n" + GOOD + "\n\n"),
    ("CRLF line ends", GOOD + "\r\n" + GOOD + "\r\n"),
    ("spaces around lines", "  " + GOOD + "  \n\t" + GOOD + "\n"),
    ("pretty separators", lines(json.dumps(row(labels={"a": "b"})), json.dumps(row()))),
    ("form feed line", GOOD + "\n\x0c\n" + GOOD + "\n"),
    ("braces and brackets in strings", lines(line(labels={"a": "{[}]"}), line(metric="x{y}[z]" * 10))),
    ("two clusters, minutes", lines(line(ts=TS + 59_999_999), line(ts=TS + 60_000_000, cluster="prod"))),
]

# (name, file content) that the reference rejects
BAD_FILES: list[tuple[str, str | bytes]] = [
    # ts
    ("ts bool", lines(line(ts=True))),
    ("ts float", lines(line(ts=1.5))),
    ("ts float integral", lines(GOOD.replace(f'"ts":{TS}', f'"ts":{TS}.0'))),
    ("ts exponent", lines(GOOD.replace(f'"ts":{TS}', '"ts":1.7e15'))),
    ("ts string of digits", lines(line(ts=str(TS)))),
    ("ts seconds", lines(line(ts=1_714_557_600))),
    ("ts upper bound", lines(line(ts=TS_MAX))),
    ("ts below 2000", lines(line(ts=TS_MIN - 1))),
    ("ts beyond int64", lines(line(ts=10**20))),
    ("ts below int64", lines(line(ts=-(10**20)))),
    ("ts -0", lines(GOOD.replace(f'"ts":{TS}', '"ts":-0'))),
    ("ts null", lines(line(ts=None))),
    ("ts missing", lines(without("ts"))),
    ("ts NaN", lines(GOOD.replace(f'"ts":{TS}', '"ts":NaN'))),
    # cluster / metric
    ("cluster empty", lines(line(cluster=""))),
    ("cluster number", lines(line(cluster=5))),
    ("cluster float", lines(line(cluster=5.5))),
    ("cluster bool", lines(line(cluster=True))),
    ("cluster null", lines(line(cluster=None))),
    ("cluster missing", lines(without("cluster"))),
    ("cluster object", lines(line(cluster={}))),
    ("metric empty", lines(line(metric=""))),
    ("metric missing", lines(without("metric"))),
    # broker
    ("broker -2", lines(line(broker=-2))),
    ("broker 2^31", lines(line(broker=2**31))),
    ("broker bool", lines(line(broker=True))),
    ("broker 1.0", lines(line(broker=1.0))),
    ("broker string", lines(line(broker="1"))),
    ("broker null", lines(line(broker=None))),
    ("broker missing", lines(without("broker"))),
    ("broker beyond uint64", lines(line(broker=2**64))),
    # topic / partition
    ("topic empty", lines(line(topic=""))),
    ("topic number", lines(line(topic=5))),
    ("topic bool", lines(line(topic=False))),
    ("partition -1", lines(line(partition=-1))),
    ("partition 2^31", lines(line(partition=2**31))),
    ("partition 1.0", lines(line(partition=1.0))),
    ("partition bool", lines(line(partition=True))),
    ("partition string", lines(line(partition="3"))),
    # labels
    ("labels number value", lines(line(labels={"a": 1}))),
    ("labels bool value", lines(line(labels={"a": True}))),
    ("labels null value", lines(line(labels={"a": None}))),
    ("labels null value among missing keys", lines(line(labels={"a": "x"}), line(labels={"a": None, "b": "y"}))),
    ("labels null value, key named topic", lines(line(labels={"topic": "x"}), line(labels={"topic": None}))),
    ("labels null value, key ending in topic", lines(line(labels={'x"topic': "v"}), line(labels={'x"topic': None}))),
    ("labels nested object", lines(line(labels={"a": {"b": "c"}}))),
    ("labels array", lines(line(labels=["a"]))),
    ("labels string", lines(line(labels="a=b"))),
    ("labels number", lines(line(labels=5))),
    ("labels string then object", lines(line(labels="x"), line(labels={"a": "b"}))),
    ("labels NaN value", lines(raw('"labels":{"a":NaN}'))),
    ("labels duplicate key", lines(raw('"labels":{"a":"x","a":5}'))),
    # value
    ("value bool", lines(line(value=True))),
    ("value string", lines(line(value="5"))),
    ("value null", lines(line(value=None))),
    ("value missing", lines(without("value"))),
    ("value NaN", lines(GOOD.replace("1234.0", "NaN"))),
    ("value Infinity", lines(GOOD.replace("1234.0", "Infinity"))),
    ("value -Infinity", lines(GOOD.replace("1234.0", "-Infinity"))),
    ("value Inf", lines(GOOD.replace("1234.0", "Inf"))),
    ("value 1e400", lines(GOOD.replace("1234.0", "1e400"))),
    ("value above 1.7e308", lines(line(value=1.75e308))),
    ("value int above 1.7e308", lines(line(value=17 * 10**307 + 1))),
    ("value int beyond double", lines(line(value=10**400))),
    ("value object", lines(line(value={}))),
    # the line itself
    ("unknown field", lines(GOOD.replace('"ts"', '"zz":1,"ts"'))),
    ("unknown null field", lines(GOOD.replace('"ts"', '"zz":null,"ts"'))),
    ("field name case", lines(GOOD.replace('"metric"', '"Metric"'))),
    ("array line", lines(GOOD, "[1,2]")),
    ("number line", lines(GOOD, "5")),
    ("null line", lines("null", GOOD)),
    ("null line last", lines(GOOD, "null")),
    ("true line", lines("true")),
    ("string line", lines('"x"')),
    ("empty object", lines("{}")),
    ("two objects on a line", GOOD + GOOD + "\n"),
    ("object then null on a line", GOOD + " null " + GOOD + "\n"),
    ("object across two lines", GOOD.replace(',"broker"', ',\n"broker"') + "\n"),
    ("object across lines plus two on one", GOOD.replace(',"broker"', ',\n"broker"') + GOOD + "\n"),
    ("unclosed object", GOOD[:-1] + "\n"),
    ("extra closing brace", GOOD + "}\n"),
    ("trailing comma", GOOD[:-1] + ",}\n"),
    ("trailing garbage", GOOD + " x\n"),
    ("comment", GOOD + " // x\n"),
    ("single quotes", lines(GOOD.replace('"dev"', "'dev'"))),
    ("bad escape", lines(GOOD.replace('"dev"', '"\\x"'))),
    ("raw control char in a string", lines(GOOD.replace('"dev"', '"d\x01v"'))),
    ("raw tab in a string", lines(GOOD.replace('"dev"', '"d\tv"'))),
    ("leading zero", lines(GOOD.replace('"broker":1', '"broker":01'))),
    ("NaN constant elsewhere", lines(GOOD.replace('"ts"', '"zz":NaN,"ts"'))),
    ("deeply nested", lines(raw('"labels":' + '{"a":' * 50 + '"x"' + "}" * 50))),
    ("very deeply nested", lines(raw('"labels":' + "[" * 100_000 + "]" * 100_000))),
    # bytes
    ("invalid UTF-8", GOOD.encode().replace(b'"dev"', b'"d\xffv"') + b"\n"),
    ("overlong UTF-8", GOOD.encode().replace(b'"dev"', b'"d\xc0\xafv"') + b"\n"),
    ("UTF-8 encoded surrogate", GOOD.encode().replace(b'"dev"', b'"d\xed\xa0\x80v"') + b"\n"),
    ("truncated UTF-8 at line end", GOOD.encode() + b"\xe2\x82\n"),
    ("UTF-8 BOM", b"\xef\xbb\xbf" + GOOD.encode() + b"\n"),
    ("UTF-8 BOM on line 2", GOOD.encode() + b"\n\xef\xbb\xbf" + GOOD.encode() + b"\n"),
    ("latin-1 file", lines(GOOD.replace('"dev"', '"café"')).encode("latin-1")),
    ("bad line after good ones", lines(*([GOOD] * 100), line(broker=-2), GOOD)),
]


@pytest.mark.parametrize("content", [c for _, c in GOOD_FILES], ids=[n for n, _ in GOOD_FILES])
def test_good_files_agree(tmp_path: Path, content: str | bytes) -> None:
    p = write(tmp_path, content)
    want = scan_python(p)
    assert want[1] is None, want  # the table is right about what the reference accepts
    assert scan_fast(p) == want


# the good shapes the collectors write, which must not need the reference (else no speed-up)
FAST_GOOD = [
    "one row",
    "collector rows",
    "broker -1",
    "topic and partition null",
    "optional fields missing",
    "int value",
    "labels object",
    "labels null then objects",
    "labels differing keys",
    "labels empty object",
    "non-ASCII strings",
    "escapes in strings",
    "no trailing newline",
    "empty file",
    "two clusters, minutes",
]


@pytest.mark.parametrize("name", FAST_GOOD)
def test_good_collector_shapes_take_the_fast_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    p = write(tmp_path, dict(GOOD_FILES)[name])
    want = scan_python(p)

    def no_reference(path: Path) -> Any:
        raise AssertionError("fell back to the reference")

    monkeypatch.setattr("lake.landing_check.scan_python", no_reference)
    assert scan_fast(p) == want


@pytest.mark.parametrize("content", [c for _, c in BAD_FILES], ids=[n for n, _ in BAD_FILES])
def test_malformed_files_agree(tmp_path: Path, content: str | bytes) -> None:
    p = write(tmp_path, content)
    want = outcome(scan_python, p)
    assert want[0] == 0 and want[1] is not None, want
    assert outcome(scan_fast, p) == want


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (lines(GOOD, GOOD, line(ts=1.5)), "line 3: ts must be epoch microseconds (2000..2100), got 1.5"),
        (lines(line(ts=True)), "line 1: ts must be epoch microseconds (2000..2100), got True"),
        (
            lines(GOOD.replace(f'"ts":{TS}', f'"ts":{TS}.0')),
            f"line 1: ts must be epoch microseconds (2000..2100), got {TS}.0",
        ),
        (lines(line(ts=str(TS))), f"line 1: ts must be epoch microseconds (2000..2100), got '{TS}'"),
        (lines(line(ts=10**20)), "line 1: ts must be epoch microseconds (2000..2100), got 100000000000000000000"),
        (lines(line(cluster=5)), "line 1: cluster must be a non-empty string, got 5"),
        (lines(without("metric")), "line 1: metric must be a non-empty string, got None"),
        ("\n" + lines(GOOD, line(broker=-2)), "line 3: broker must be a node id (or -1), got -2"),
        (lines(line(broker=1.0)), "line 1: broker must be a node id (or -1), got 1.0"),
        (lines(line(topic="")), "line 1: topic must be a string or null, got ''"),
        (lines(line(partition=True)), "line 1: partition must be a non-negative int or null, got True"),
        (lines(line(labels={"a": 1})), "line 1: labels must be an object of strings or null"),
        (
            lines(line(labels={"a": "x"}), line(labels={"a": None})),
            "line 2: labels must be an object of strings or null",
        ),
        (lines(line(value=True)), "line 1: value must be a finite number, got True"),
        (lines(line(value="5")), "line 1: value must be a finite number, got '5'"),
        (lines(GOOD.replace("1234.0", "1e400")), "line 1: value must be a finite number, got inf"),
        (lines(line(value=1.75e308)), "line 1: value out of range"),
        (lines(line(value=10**400)), "line 1: value out of range"),
        (lines(raw('"labels":' + "[" * 100_000 + "]" * 100_000)), "line 1: not valid JSON: nested too deeply"),
        (lines(GOOD.replace("1234.0", "NaN")), "line 1: not valid JSON: NaN is not a number JSON allows"),
        (lines(GOOD.replace("1234.0", "-Infinity")), "line 1: not valid JSON: -Infinity is not a number JSON allows"),
        (lines(GOOD.replace('"ts"', '"zz":1,"ts"')), "line 1: unknown field(s) ['zz']"),
        (lines(GOOD, "[1,2]"), "line 2: not a JSON object"),
        (lines(GOOD, "null"), "line 2: not a JSON object"),
        (GOOD + GOOD + "\n", f"line 1: not valid JSON: Extra data: line 1 column {len(GOOD) + 1} (char {len(GOOD)})"),
        (
            GOOD.encode().replace(b'"dev"', b'"d\xffv"') + b"\n",
            f"line 1: not valid JSON: 'utf-8' codec can't decode byte 0xff in position {GOOD.index('dev') + 1}: invalid start byte",
        ),
    ],
)
def test_reason_text_is_the_references(tmp_path: Path, content: str | bytes, reason: str) -> None:
    p = write(tmp_path, content)
    assert scan_fast(p) == (0, reason, set())
    assert scan_python(p) == (0, reason, set())


def test_empty_and_blank_files_are_good_with_no_rows(tmp_path: Path) -> None:
    assert scan_fast(write(tmp_path, "", "a.jsonl")) == (0, None, set())
    assert scan_fast(write(tmp_path, "\n \n\n", "b.jsonl")) == (0, None, set())


def test_unreadable_file(tmp_path: Path) -> None:
    p = tmp_path / "missing.jsonl"
    got = scan_fast(p)
    assert got == scan_python(p)
    assert got[1] is not None and got[1].startswith("cannot read: ")


@pytest.mark.parametrize("chunk_bytes", [64, 1000, 4096])
@pytest.mark.parametrize("name", ["labels null then objects", "two clusters, minutes", "no trailing newline"])
def test_small_blocks_agree(tmp_path: Path, chunk_bytes: int, name: str) -> None:
    """Blocks smaller than a line, and blocks cutting the file anywhere: the same answer."""
    content = dict(GOOD_FILES)[name]
    p = write(tmp_path, content)
    assert scan_fast(p, chunk_bytes=chunk_bytes) == scan_python(p)


@pytest.mark.parametrize("bad_at", [0, 777, 19_999])
def test_one_bad_line_in_a_big_file_is_found_in_any_block(tmp_path: Path, bad_at: int) -> None:
    rows = [line(ts=TS + i * 1000, partition=i % 100) for i in range(20_000)]
    rows[bad_at] = line(ts=TS + bad_at * 1000, partition=-1)
    p = write(tmp_path, lines(*rows))
    want = (0, f"line {bad_at + 1}: partition must be a non-negative int or null, got -1", set())
    assert scan_python(p) == want
    assert scan_fast(p, chunk_bytes=100_000) == want


def test_larger_good_file_rows_and_minutes(tmp_path: Path) -> None:
    """20,000 rows, two clusters, over several minutes; a few with labels (group lag)."""
    rows = []
    for i in range(20_000):
        ts = TS + i * 15_000  # 15 ms apart: 300 s in all
        cluster = "dev" if i % 2 else "prod"
        labels = {"group": f"g{i % 7}"} if i % 10 == 0 else None
        rows.append(line(ts=ts, cluster=cluster, broker=i % 5, partition=i % 100, labels=labels, value=float(i)))
    p = write(tmp_path, lines(*rows))
    want_minutes = {(c, MINUTE + 60 * m) for c in ("dev", "prod") for m in range(5)}
    assert scan_python(p) == (20_000, None, want_minutes)
    assert scan_fast(p) == (20_000, None, want_minutes)
    assert scan_fast(p, chunk_bytes=200_000) == (20_000, None, want_minutes)


def test_labels_null_for_megabytes_then_objects_takes_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Broker rows (labels null) for more than Arrow's default 1 MiB JSON block, then group-lag rows
    (labels objects): read as one Arrow block, else Arrow fails to unify the two inferred types."""
    rows = [line(ts=TS + i, partition=i % 100) for i in range(12_000)]
    rows += [line(ts=TS + i, topic=None, partition=None, labels={"group": f"g{i % 3}"}) for i in range(12_000)]
    p = write(tmp_path, lines(*rows))
    assert 2 << 20 < p.stat().st_size < 4 << 20
    want = scan_python(p)
    assert want == (24_000, None, {("dev", MINUTE)})

    def no_reference(path: Path) -> Any:
        raise AssertionError("fell back to the reference")

    monkeypatch.setattr("lake.landing_check.scan_python", no_reference)
    assert scan_fast(p) == want
