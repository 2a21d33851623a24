"""The Slack side's view of the one settings object (kbot_settings, which defines and validates
every variable; `kbot config` shows them): :class:`SlackSettings`, built from the KbotSettings the
process loaded once at its edge (:meth:`SlackSettings.from_settings`), never from the environment.

    SLACK_BOT_TOKEN           xoxb-... the bot's Web API token
    SLACK_SIGNING_SECRET      verifies that HTTP requests come from Slack (HTTP mode)
    SLACK_APP_TOKEN           xapp-... when set, the bot connects by Socket Mode instead of HTTP
    SLACK_API_URL             base URL of the Web API (default https://slack.com/api/); tests and
                              the load benchmark point it at a local stand-in
    KBOT_ALLOWED_TEAM_IDS     comma list of workspace ids allowed to talk to the bot (empty: any)
    KBOT_ALLOWED_ENTERPRISE_IDS  comma list of Enterprise Grid org ids allowed (empty: any); with this
                              and KBOT_ALLOWED_TEAM_IDS both empty any workspace where the app is
                              installed may call the bot, and `kbot serve --check` says so loudly
    KBOT_ALLOWED_API_APP_IDS  comma list of Slack app ids whose requests are accepted (empty: any)
    KBOT_RBAC_FILE            YAML policy (gate/rbac.py); without it read-only commands are open
                              everywhere and every mutating command is refused. Its
                              ``terminal_users`` section maps OS accounts to Slack users or roles
                              (user groups); an unmapped terminal user cannot approve an action
                              requested from Slack (bot/identity.py)
    KBOT_DIGEST_SCHEDULES     digest schedules (bot/scheduler.py), ';' or newline separated
    KBOT_STATE_DIR            pending actions (sqlite) and the audit log (default ~/.kbot); the folder
                              is kept 0700 and every state file in it 0600 (``private_dir``/``private_file``)
    KBOT_PORT                 HTTP port (default 3000; PORT is honoured when KBOT_PORT is unset)
    KBOT_CONFIRM_TTL_S        how long a preview's Confirm button stays valid (default 900)
    KBOT_HIGH_RISK_KINDS      action kinds that always need a second approver (default abort-txn);
                              a plan can also mark itself high risk (retention lowering does)
    KBOT_APPROVERS_REQUIRED   distinct approvers, other than the requester, a high-risk action needs (default 1)
    KBOT_MAX_IN_FLIGHT        requests worked on at once (default 16); more wait, already acked, for a
                              slot, so a burst's work does not delay the next acks
    KBOT_AUDIT_TOPIC          when set, audit records are also produced to this Kafka topic
    KBOT_AUDIT_CLUSTER        the configured cluster (live/config.py) holding that topic (default: the default cluster)

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
