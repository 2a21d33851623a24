"""The Slack side's view of the one settings object (kbot_settings, which defines and validates
every variable; `kbot config` shows them): :class:`SlackSettings`, built from the KbotSettings the
process loaded once at its edge (:meth:`SlackSettings.from_settings`), never from the environment.

Its variables (SLACK_*, the allow-lists, the RBAC file, the gate's and the digests' settings) are
fields of KbotSettings, described there once.

Secrets never appear in ``repr``: a SlackSettings object is safe to log. It keeps the settings it
is a view of (``kbot``): the parts parsed by their own modules (cluster routing, alert routes, the
health address) read them there.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from kbot_settings import KbotSettings

DEFAULT_API_URL = "https://slack.com/api/"

log = logging.getLogger(__name__)


def _csv(value: str | None) -> frozenset[str]:
    return frozenset(v.strip() for v in (value or "").split(",") if v.strip())


@dataclass(frozen=True)
class SlackSettings:
    bot_token: str | None = field(default=None, repr=False)
    signing_secret: str | None = field(default=None, repr=False)
    app_token: str | None = field(default=None, repr=False)
    api_url: str = DEFAULT_API_URL
    allowed_team_ids: frozenset[str] = frozenset()
    allowed_enterprise_ids: frozenset[str] = frozenset()
    allowed_api_app_ids: frozenset[str] = frozenset()
    rbac_file: Path | None = None
    digest_schedules: str = ""
    state_dir: Path = Path.home() / ".kbot"
    port: int = 3000
    confirm_ttl_s: float = 900.0
    high_risk_kinds: frozenset[str] = frozenset({"abort-txn"})
    approvers_required: int = 1
    max_in_flight: int = 16
    audit_topic: str | None = None
    audit_cluster: str | None = None
    # the settings this is a view of (typed, validated; built in code: every default)
    kbot: KbotSettings = field(default_factory=KbotSettings, repr=False, compare=False)

    @classmethod
    def from_settings(cls, s: KbotSettings) -> "SlackSettings":
        """The Slack side's view of the settings the process loaded (kbot_settings.load, which
        named every wrong variable already)."""

        secret = lambda v: v.get_secret_value() if v is not None else None  # noqa: E731
        return cls(
            bot_token=secret(s.slack_bot_token),
            signing_secret=secret(s.slack_signing_secret),
            app_token=secret(s.slack_app_token),
            api_url=s.slack_api_url,
            allowed_team_ids=_csv(s.kbot_allowed_team_ids),
            allowed_enterprise_ids=_csv(s.kbot_allowed_enterprise_ids),
            allowed_api_app_ids=_csv(s.kbot_allowed_api_app_ids),
            rbac_file=s.kbot_rbac_file.expanduser() if s.kbot_rbac_file else None,
            digest_schedules=s.kbot_digest_schedules or "",
            state_dir=s.state_dir,
            port=s.kbot_port,
            confirm_ttl_s=s.kbot_confirm_ttl_s,
            high_risk_kinds=_csv(s.kbot_high_risk_kinds),
            approvers_required=s.kbot_approvers_required,
            max_in_flight=s.kbot_max_in_flight,
            audit_topic=s.kbot_audit_topic,
            audit_cluster=s.kbot_audit_cluster,
            kbot=s,
        )

    @property
    def mode(self) -> str | None:
        """ "socket" with an app token, "http" with a bot token and signing secret, else None."""
        if self.bot_token and self.app_token:
            return "socket"
        if self.bot_token and self.signing_secret:
            return "http"
        return None

    def missing(self) -> str:
        """What is missing for Slack, in words, for `kbot serve` to say."""
        if self.mode is not None:
            return ""
        if not self.bot_token:
            return "SLACK_BOT_TOKEN is not set (plus SLACK_SIGNING_SECRET for HTTP, or SLACK_APP_TOKEN for Socket Mode)"
        return "SLACK_BOT_TOKEN is set but neither SLACK_SIGNING_SECRET (HTTP) nor SLACK_APP_TOKEN (Socket Mode) is"

    def open_origin_warning(self) -> str:
        """Non-empty when no workspace or org allow-list is set: then the signing secret alone decides."""
        if self.allowed_team_ids or self.allowed_enterprise_ids:
            return ""
        return (
            "KBOT_ALLOWED_TEAM_IDS and KBOT_ALLOWED_ENTERPRISE_IDS are both empty: ANY Slack workspace "
            "or Enterprise Grid org where this app is installed may call the bot. Set one of them."
        )

    def secrets(self) -> list[str]:
        """The values that must never reach a log line or an audit record."""
        return [s for s in (self.bot_token, self.signing_secret, self.app_token) if s]
