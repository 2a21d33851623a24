"""Read the lake's series from a Prometheus that already scrapes the brokers (``query_range``).

Most Kafka shops already run a Prometheus against the JMX exporters; with
``KBOT_METRICS_SOURCE=prometheus`` the collector asks it instead of scraping the exporters
itself.  Each round asks ``/api/v1/query_range`` for every series the lake maps
(``lake.mapping.SAMPLES``: the names the exporter rules in ``localkafka/config/jmx_rules.yaml``
give, which Prometheus stores unchanged) over the time since the last round, and turns each
returned point into the same row the exporter path writes (``Mapper.row``).

Why ``query_range`` and aligned steps
-------------------------------------
The evaluation instants are multiples of ``step`` (the scrape interval), the same for every
series: replicas of a partition then share ``ts`` as they do in an exporter round, which the
lake queries rely on (``window_queries.hot``).  A target Prometheus cannot scrape gets a
staleness marker, so a dead broker yields no points - the same evidence as a failed scrape.
Instants newer than ``now - settle_s`` are left for the next round, so a scrape that started
before an instant but was not stored yet is not missed.

Resume without loss or duplicates
---------------------------------
``<lake dir>/prometheus.state.json`` holds the last instant written, and the window being
fetched (``pending``) before it is fetched.  A window's landing file has a name derived from
the window alone, so if a crash comes after the file was written but before the state moved
on, the restart asks for the same window again, writes a file of the same name, and ingest
skips it as a re-delivery (``lake.ingest``: a name already in ``done/``).  A round that fails
(bad URL, HTTP 4xx/5xx, timeout, malformed answer) leaves the state where it was and reports
one line; the next round asks again from the same instant, so it catches up.

Configuration (``from_settings``)::

    KBOT_PROMETHEUS_URL           base URL, e.g. http://127.0.0.1:9090 (required)
    KBOT_PROMETHEUS_BROKER_LABEL  the label holding the node id (default node_id, what
                                  deploy/prometheus/prometheus.yml and bot/alerts_stack.py set)
    KBOT_PROMETHEUS_SELECTOR      extra label matchers for every query, e.g. cluster="prod",job="kafka"
"""

from __future__ import annotations

import asyncio
import datetime as _dt
import hashlib
import json
import logging
import math
import os
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbot_settings import KbotSettings
from lake.landing import fsync_dir, land
from lake.mapping import Mapper

log = logging.getLogger(__name__)

URL_ENV = "KBOT_PROMETHEUS_URL"
BROKER_LABEL_ENV = "KBOT_PROMETHEUS_BROKER_LABEL"
SELECTOR_ENV = "KBOT_PROMETHEUS_SELECTOR"
DEFAULT_BROKER_LABEL = "node_id"
STATE_FILE = "prometheus.state.json"
# Prometheus refuses more than 11,000 points per series in one query_range; stay well below.
MAX_POINTS = 1000
# Labels Prometheus adds to every scraped series (target labels): not the exporter's, so not
# kept in the row's labels.  The broker label and ``cluster`` are dropped as well.
TARGET_LABELS = frozenset({"__name__", "job", "instance", "cluster"})

_LABEL = r"[a-zA-Z_][a-zA-Z0-9_]*"
_MATCHER = re.compile(rf'\s*{_LABEL}\s*(=|!=|=~|!~)\s*"(?:[^"\\]|\\.)*"\s*')


class PrometheusSourceError(ValueError):
    """The Prometheus source is configured wrongly (one line, names the setting)."""


def parse_selector(text: str) -> str:
    """``cluster="prod", job="kafka"`` -> the same matchers, validated (ValueError otherwise).

    Only label matchers with quoted values are accepted, so the setting can add conditions to
    the query but never change its shape."""
    text = text.strip().removeprefix("{").removesuffix("}").strip()
    if not text:
        return ""
    parts: list[str] = []
    pos = 0
    while pos < len(text):
        m = _MATCHER.match(text, pos)
        if m is None:
            raise PrometheusSourceError(f'{SELECTOR_ENV}: expected label matchers like cluster="prod", got {text!r}')
        parts.append(m.group(0).strip())
        pos = m.end()
        if pos < len(text):
            if text[pos] != ",":
                raise PrometheusSourceError(f"{SELECTOR_ENV}: expected ',' between matchers in {text!r}")
            pos += 1
    return ",".join(parts)


def _fmt(ts_s: float) -> str:
    return _dt.datetime.fromtimestamp(ts_s, _dt.timezone.utc).strftime("%H:%M:%S")


def window_file_name(start_s: float, end_s: float, step_s: float) -> str:
    """Landing file name of one window: sortable by time and the same for the same window."""
    t = _dt.datetime.fromtimestamp(start_s, _dt.timezone.utc)
    digest = hashlib.sha1(f"{start_s:.3f}/{end_s:.3f}/{step_s:.3f}".encode()).hexdigest()[:8]
    return f"{t:%Y%m%dT%H%M%S.%f}Z-prom{digest}.jsonl"


@dataclass
class PromRound:
    """What one round of the Prometheus source did."""

    url: str
    windows: list[tuple[float, float]] = field(default_factory=list)  # (first, last) instant, seconds
    files: list[Path] = field(default_factory=list)
    rows: int = 0
    series: int = 0
    brokers: set[int] = field(default_factory=set)
    skipped_series: int = 0  # no usable broker label
    error: str | None = None
    next_instant: float | None = None  # where the next round starts

    def summary(self) -> str:
        """One line: the instants fetched (UTC), series, rows and brokers; or the error and
        the instant the next round starts from."""
        parts = []
        if self.windows:
            span = f"{_fmt(self.windows[0][0])}..{_fmt(self.windows[-1][1])} UTC"
            parts.append(f"{span}, {self.series:,} series, {self.rows:,} rows from {len(self.brokers)} broker(s)")
            if self.skipped_series:
                parts[-1] += f" ({self.skipped_series} series without a numeric broker label skipped)"
        elif not self.error:
            parts.append("nothing new yet")
        if self.error:
            resume = f"; retrying from {_fmt(self.next_instant)} UTC next round" if self.next_instant else ""
            parts.append(f"error: {self.error}{resume}")
        return f"prometheus {self.url}: " + "; ".join(parts)


class PrometheusSource:
    """Windows of the lake's series from one Prometheus, written as landing files."""

    def __init__(
        self,
        url: str,
        state_dir: str | os.PathLike[str],
        cluster: str,
        *,
        step_s: float = 10.0,
        timeout_s: float = 10.0,
        settle_s: float = 5.0,
        backfill_s: float = 0.0,
        broker_label: str = DEFAULT_BROKER_LABEL,
        selector: str = "",
        mapper: Mapper | None = None,
        clock: Callable[[], float] = time.time,
    ):
        url = url.strip().rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise PrometheusSourceError(f"{URL_ENV} must start with http:// or https://, got {url!r}")
        if not re.fullmatch(_LABEL, broker_label):
            raise PrometheusSourceError(f"{BROKER_LABEL_ENV}: {broker_label!r} is not a label name")
        if step_s <= 0 or timeout_s <= 0 or settle_s < 0 or backfill_s < 0:
            raise PrometheusSourceError("step and timeout must be positive, settle and backfill not negative")
        self.url = url
        self.state_file = Path(state_dir) / STATE_FILE
        self.cluster = cluster
        self.step_s = float(step_s)
        self.timeout_s = float(timeout_s)
        self.settle_s = float(settle_s)
        self.backfill_s = float(backfill_s)
        self.broker_label = broker_label
        self.selector = parse_selector(selector)
        self.mapper = mapper or Mapper()
        self.clock = clock
        self.drop_labels = TARGET_LABELS | {broker_label}

    @classmethod
    def from_settings(
        cls, state_dir: str | os.PathLike[str], cluster: str, settings: KbotSettings, **kwargs: Any
    ) -> "PrometheusSource":
        url = (settings.kbot_prometheus_url or "").strip()
        if not url:
            raise PrometheusSourceError(f"KBOT_METRICS_SOURCE=prometheus needs {URL_ENV} (e.g. http://127.0.0.1:9090)")
        return cls(
            url,
            state_dir,
            cluster,
            broker_label=settings.kbot_prometheus_broker_label,
            selector=settings.kbot_prometheus_selector or "",
            **kwargs,
        )

    # ---- the query
    def promql(self) -> str:
        """One query for every mapped series (a regex on the metric name), with the broker label set."""
        names = "|".join(sorted(self.mapper.table))
        matchers = [f'__name__=~"{names}"', f'{self.broker_label}!=""']
        if self.selector:
            matchers.append(self.selector)
        return "{" + ",".join(matchers) + "}"

    # ---- state
    def _load_state(self) -> dict[str, Any]:
        try:
            data = json.loads(self.state_file.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            # a damaged state file must not stop collection: start from now, say so once
            log.warning("prometheus source: ignoring unreadable %s (%s)", self.state_file, exc)
            return {}
        return data if isinstance(data, dict) else {}

    def _save_state(self, state: dict[str, Any]) -> None:
        self.state_file.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(f".{self.state_file.name}.tmp")
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(state, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.state_file)
        fsync_dir(self.state_file.parent)

    def _align(self, t: float) -> float:
        return math.floor(t / self.step_s) * self.step_s

    def next_window(self, state: dict[str, Any], now: float) -> tuple[float, float] | None:
        """(first, last) instant of the next window to fetch, or None when nothing is due yet."""
        pending = state.get("pending")
        if isinstance(pending, list) and len(pending) == 2:
            return float(pending[0]), float(pending[1])  # a window started before a crash: the same again
        newest = self._align(now - self.settle_s)
        last = state.get("last")
        if isinstance(last, (int, float)):
            first = float(last) + self.step_s
        else:
            first = self._align(newest - self.backfill_s)
        if first > newest:
            return None
        return first, min(newest, first + (MAX_POINTS - 1) * self.step_s)

    # ---- one round
    async def collect(self, session: Any, landing_dir: str | os.PathLike[str]) -> PromRound:
        """Fetch every window due (several when catching up), each into its own landing file.
        Never raises for Prometheus's own failures: they end up in ``PromRound.error``."""

        out = PromRound(self.url)
        state = self._load_state()
        while True:
            window = self.next_window(state, self.clock())
            if window is None:
                break
            first, last = window
            state = {"last": state.get("last"), "pending": [first, last]}
            await asyncio.to_thread(self._save_state, state)
            try:
                data = await self._query_range(session, first, last)
                rows = await asyncio.to_thread(self._rows, data, out)
            except PrometheusQueryError as exc:
                out.error = str(exc)
                out.next_instant = first
                break
            if rows:
                name = window_file_name(first, last, self.step_s)
                out.files.append(await land(landing_dir, rows, name))
            out.rows += len(rows)
            out.windows.append((first, last))
            state = {"last": last}
            await asyncio.to_thread(self._save_state, state)
        return out

    async def _query_range(self, session: Any, first: float, last: float) -> Any:
        import aiohttp

        form = {
            "query": self.promql(),
            "start": f"{first:.3f}",
            "end": f"{last:.3f}",
            "step": f"{self.step_s:g}s",
            "timeout": f"{self.timeout_s:g}s",
        }
        where = f"{self.url}/api/v1/query_range"
        try:
            # POST: the query names ~45 series and would make a long URL
            async with session.post(where, data=form, timeout=aiohttp.ClientTimeout(total=self.timeout_s)) as resp:
                body = await resp.text()
                status = resp.status
        except asyncio.TimeoutError:
            raise PrometheusQueryError(f"no answer from {where} within {self.timeout_s:g}s") from None
        except (aiohttp.ClientError, OSError) as exc:
            raise PrometheusQueryError(f"cannot reach {where}: {_one_line(exc)}") from None
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if status != 200 or not isinstance(doc, dict) or doc.get("status") != "success":
            detail = doc.get("error") if isinstance(doc, dict) else None
            detail = detail or " ".join(body.split())[:200] or "empty body"
            raise PrometheusQueryError(f"{where} answered HTTP {status}: {detail}")
        data = doc.get("data")
        if not isinstance(data, dict) or data.get("resultType") != "matrix" or not isinstance(data.get("result"), list):
            raise PrometheusQueryError(f"{where} answered something that is not a range-query matrix")
        return data["result"]

    def _rows(self, result: list[Any], out: PromRound) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for series in result:
            metric = series.get("metric") if isinstance(series, dict) else None
            values = series.get("values") if isinstance(series, dict) else None
            if not isinstance(metric, dict) or not isinstance(values, list):
                raise PrometheusQueryError("a series in the answer has no metric/values")
            out.series += 1
            name = str(metric.get("__name__", ""))
            try:
                broker = int(str(metric.get(self.broker_label, "")))
            except ValueError:
                out.skipped_series += 1
                continue
            labels = {str(k): str(v) for k, v in metric.items() if k not in self.drop_labels}
            kept = False
            for point in values:
                try:
                    ts_s, raw = float(point[0]), float(point[1])
                except (TypeError, ValueError, IndexError):
                    raise PrometheusQueryError(f"a point of {name} is not [time, value]") from None
                # milliseconds, as the exporter path: Prometheus's own resolution
                ts_us = int(round(ts_s * 1000)) * 1000
                row = self.mapper.row(name, labels, raw, broker=broker, ts_us=ts_us, cluster=self.cluster)
                if row is not None:
                    rows.append(row)
                    kept = True
            if kept:
                out.brokers.add(broker)
        return rows


class PrometheusQueryError(RuntimeError):
    """Prometheus did not answer a range query usefully (the round is retried)."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
