"""What Alertmanager sends the bot and where its alerts go: the webhook's configuration, the
routes from labels to channels (and clusters), and the version 4 notification, parsed and checked.
bot/alerts.py opens and keeps the threads.

Configuration (environment):

    KBOT_ALERT_TOKEN    the bearer token Alertmanager sends (``http_config.authorization``);
                        without it the endpoint is not served. Never logged.
    KBOT_ALERT_ROUTES   YAML routing alerts to channels (below); optional with KBOT_ALERT_CHANNEL
    KBOT_ALERT_CHANNEL  the channel for alerts no route matches (optional when routes cover all)

    routes:                                # first match wins; every listed label must match
      - match: {severity: critical}        # exact label values
        match_re: {topic: "payments-.*"}   # or full-match regular expressions
        channel: C0INCIDENTS               # a channel id (or #name)
        cluster: prod                      # the configured cluster to diagnose (live/config.py)
      - match: {}
        channel: C0KAFKAALERTS
    default_channel: C0KAFKAALERTS         # same as KBOT_ALERT_CHANNEL
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kbot_settings import KbotSettings

PATH = "/alerts/alertmanager"
ROUTES_ENV, TOKEN_ENV, CHANNEL_ENV = "KBOT_ALERT_ROUTES", "KBOT_ALERT_TOKEN", "KBOT_ALERT_CHANNEL"
MAX_LABELS_SHOWN = 12
# Label names that scope a diagnosis. The JMX exporter names them after the MBean tags (topic,
# partition); kafka_exporter calls a group "consumergroup"; our scrape config adds node_id.
TOPIC_LABELS = ("topic",)
GROUP_LABELS = ("group", "consumergroup", "consumer_group")
BROKER_LABELS = ("node_id", "broker", "broker_id", "node")


class AlertConfigError(ValueError):
    """The alert routing configuration is wrong; the message is one line naming the place."""


# ---- routing configuration ---------------------------------------------------------------------


@dataclass(frozen=True)
class Route:
    channel: str
    match: dict[str, str] = field(default_factory=dict)
    match_re: dict[str, re.Pattern] = field(default_factory=dict)
    cluster: str | None = None

    def matches(self, labels: dict[str, str]) -> bool:
        return all(labels.get(k) == v for k, v in self.match.items()) and all(
            p.fullmatch(labels.get(k, "")) is not None for k, p in self.match_re.items()
        )


@dataclass(frozen=True)
class AlertConfig:
    token: str = dataclasses.field(repr=False, default="")
    routes: tuple[Route, ...] = ()
    default_channel: str | None = None

    def route(self, labels: dict[str, str]) -> Route | None:
        for r in self.routes:
            if r.matches(labels):
                return r
        return Route(self.default_channel) if self.default_channel else None

    @classmethod
    def from_settings(cls, settings: KbotSettings) -> "AlertConfig | None":
        """None when the webhook is not configured (no token); AlertConfigError when it is, wrongly."""

        secret = settings.kbot_alert_token
        token = secret.get_secret_value().strip() if secret is not None else ""
        routes_file = str(settings.kbot_alert_routes or "").strip()
        channel = (settings.kbot_alert_channel or "").strip() or None
        if not token:
            if routes_file or channel:
                raise AlertConfigError(f"{TOKEN_ENV} is not set: the Alertmanager webhook needs a bearer token")
            return None
        routes, default = (), None
        if routes_file:
            routes, default = load_routes(Path(routes_file).expanduser())
        default = channel or default
        if not routes and not default:
            raise AlertConfigError(f"alerts have nowhere to go: set {CHANNEL_ENV} or {ROUTES_ENV}")
        return cls(token, routes, default)


def _str_map(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, (str, int, float)) and not isinstance(v, bool) for k, v in value.items()
    ):
        raise AlertConfigError(f"{where}: must be a mapping of label name to value")
    return {k: str(v) for k, v in value.items()}


def _channel(value: Any, where: str) -> str:
    if not isinstance(value, str) or not re.fullmatch(r"#[\w.-]{1,80}|[CGD][A-Z0-9]{2,}", value.strip()):
        raise AlertConfigError(f"{where}: must be a channel id (C0123ABC) or #name, got {value!r}"[:300])
    return value.strip()


def load_routes(path: Path) -> tuple[tuple[Route, ...], str | None]:
    import yaml

    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise AlertConfigError(f"{path}: cannot read it ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        raise AlertConfigError(f"{path}{f':{mark.line + 1}' if mark else ''}: not valid YAML") from None
    if not isinstance(data, dict):
        raise AlertConfigError(f"{path}: must be a mapping with 'routes' (and optionally 'default_channel')")
    unknown = set(data) - {"routes", "default_channel"}
    if unknown:
        raise AlertConfigError(f"{path}: unknown key(s) {', '.join(sorted(map(str, unknown)))}")
    raw = data.get("routes") or []
    if not isinstance(raw, list):
        raise AlertConfigError(f"{path}: routes must be a list")
    routes = []
    for i, r in enumerate(raw):
        where = f"{path}: routes[{i}]"
        if not isinstance(r, dict):
            raise AlertConfigError(f"{where}: must be a mapping")
        extra = set(r) - {"match", "match_re", "channel", "cluster"}
        if extra:
            raise AlertConfigError(f"{where}: unknown key(s) {', '.join(sorted(map(str, extra)))}")
        patterns = {}
        for k, v in _str_map(r.get("match_re"), f"{where}.match_re").items():
            try:
                patterns[k] = re.compile(v)
            except re.error as exc:
                raise AlertConfigError(f"{where}.match_re.{k}: not a regular expression ({exc})") from None
        cluster = r.get("cluster")
        if cluster is not None and (not isinstance(cluster, str) or not cluster.strip()):
            raise AlertConfigError(f"{where}.cluster: must be a cluster name")
        routes.append(
            Route(
                _channel(r.get("channel"), f"{where}.channel"),
                _str_map(r.get("match"), f"{where}.match"),
                patterns,
                cluster.strip() if cluster else None,
            )
        )
    default = data.get("default_channel")
    return tuple(routes), _channel(default, f"{path}: default_channel") if default is not None else None


# ---- the notification --------------------------------------------------------------------------


class BadNotification(ValueError):
    pass


@dataclass
class Alert:
    status: str
    labels: dict[str, str]
    annotations: dict[str, str]
    starts_at: str
    ends_at: str
    fingerprint: str

    @property
    def name(self) -> str:
        return self.labels.get("alertname", "unnamed alert")

    def first(self, names: tuple[str, ...]) -> str | None:
        return next((self.labels[n] for n in names if self.labels.get(n)), None)

    @property
    def symptom(self) -> str:
        return (self.annotations.get("kbot_symptom") or self.labels.get("kbot_symptom") or self.name).strip()

    @property
    def explicit_symptom(self) -> bool:
        return bool(self.annotations.get("kbot_symptom") or self.labels.get("kbot_symptom"))

    @property
    def entity(self) -> str:
        """What it is about, for a one-line list: broker 101, topic orders, group billing ..."""
        parts = [
            f"{kind} {v}"
            for kind, names in (
                ("broker", BROKER_LABELS),
                ("topic", TOPIC_LABELS),
                ("partition", ("partition",)),
                ("group", GROUP_LABELS),
            )
            if (v := self.first(names))
        ]
        return ", ".join(parts) or self.labels.get("instance") or self.fingerprint


@dataclass
class Notification:
    group_key: str
    status: str
    receiver: str
    group_labels: dict[str, str]
    common_labels: dict[str, str]
    common_annotations: dict[str, str]
    external_url: str
    alerts: list[Alert]
    truncated: int = 0


def _labels(value: Any, where: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise BadNotification(f"{where} is not a map of strings")
    return dict(value)


def parse_notification(body: bytes) -> Notification:
    """Alertmanager's webhook payload, version 4; BadNotification says what is wrong in one line."""
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise BadNotification(f"not JSON ({type(exc).__name__})") from None
    if not isinstance(data, dict):
        raise BadNotification(f"a JSON {type(data).__name__}, not an object")
    if str(data.get("version")) != "4":
        raise BadNotification(f"version {str(data.get('version'))[:20]!r}, expected '4'")
    for key in ("groupKey", "status"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise BadNotification(f"'{key}' missing or not a string")
    if data["status"] not in ("firing", "resolved"):
        raise BadNotification(f"status {data['status'][:20]!r} is neither firing nor resolved")
    raw = data.get("alerts")
    if not isinstance(raw, list) or not raw or not all(isinstance(a, dict) for a in raw):
        raise BadNotification("'alerts' is not a non-empty list of objects")
    alerts = []
    for i, a in enumerate(raw):
        if a.get("status") not in ("firing", "resolved") or not isinstance(a.get("fingerprint"), str):
            raise BadNotification(f"alerts[{i}] lacks a status or fingerprint")
        alerts.append(
            Alert(
                a["status"],
                _labels(a.get("labels"), f"alerts[{i}].labels"),
                _labels(a.get("annotations"), f"alerts[{i}].annotations"),
                str(a.get("startsAt") or ""),
                str(a.get("endsAt") or ""),
                a["fingerprint"],
            )
        )
    truncated = data.get("truncatedAlerts") or 0
    return Notification(
        data["groupKey"],
        data["status"],
        str(data.get("receiver") or ""),
        _labels(data.get("groupLabels"), "groupLabels"),
        _labels(data.get("commonLabels"), "commonLabels"),
        _labels(data.get("commonAnnotations"), "commonAnnotations"),
        str(data.get("externalURL") or ""),
        alerts,
        truncated if isinstance(truncated, int) else 0,
    )


def parse_time(value: str) -> float | None:
    """Alertmanager's RFC 3339 times (nanoseconds, 'Z'); the zero time (0001-01-01) is None."""
    if not value or value.startswith("0001-"):
        return None
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(\.\d+)?(Z|[+-]\d\d:\d\d)$", value)
    if not m:
        return None
    frac = float(m.group(2) or 0)
    tz = "+00:00" if m.group(3) == "Z" else m.group(3)
    try:
        return dt.datetime.fromisoformat(m.group(1) + tz).timestamp() + frac
    except ValueError:
        return None


def duration(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    h, rest = divmod(seconds, 3600)
    m, s = divmod(rest, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def utc(ts: float) -> str:
    return dt.datetime.fromtimestamp(ts, dt.timezone.utc).strftime("%H:%M:%S UTC")
