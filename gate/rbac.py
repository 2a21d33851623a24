"""Who may ask what, where: a small YAML policy plus the Slack facts it needs (guest? group member?).

Policy file (KBOT_RBAC_FILE)::

    channels: [C0KAFKAOPS, C0INCIDENTS]   # where the bot answers at all; "*" or absent = any channel
    read_only: open                       # "open": any member may run read-only commands in those
                                          # channels; "granted": read-only needs a grant too
    grants:                               # mutating commands are refused unless a grant names them
      - name: oncall-actions
        users: [U0ALICE]                  # Slack user ids
        groups: [S0KAFKAONCALL]           # user groups, resolved with usergroups.users.list
        channels: [C0KAFKAOPS]            # optional: only there (default: any allowed channel)
        commands: [abort-txn, elect-leaders, throttle set, retention]   # or ["*"]
    deny:                                 # checked first; same fields as a grant
      - name: contractors-no-actions
        users: [U0BOB]
        commands: ["*"]
    break_glass:                          # who may confirm a two-person action alone, with a reason
      - name: oncall-lead                 # (`break-glass <token> <reason>`): same fields as a grant;
        groups: [S0KAFKALEADS]            # the reason is audited and shown in the incident timeline.
        commands: [abort-txn, retention]  # The user must also hold a grant for the command.
    terminal_users:                       # who a shell on the bot host is, for `kbot ask "confirm ..."`
      alice: U0ALICE                      # OS account (from the process uid, never $USER) -> Slack user:
                                          # grants, deny rules and self-approval apply as to that user
      deploy:                             # or a role: treated as a member of these user groups
        groups: [S0KAFKAONCALL]
      carol: {user: U0CAROL, groups: [S0KAFKAONCALL]}   # both (groups listed here count even
                                          # when Slack cannot be asked, e.g. no SLACK_BOT_TOKEN)

An OS account missing from ``terminal_users`` may still run read-only commands in the terminal and
confirm or cancel actions it requested itself from the terminal, but it cannot approve or cancel
an action requested from Slack: the refusal says which line to add (bot/identity.py).

Every verdict names the rule that decided it, so a refusal can say why. ``Policy.check`` is pure;
``Directory`` asks Slack (users.info, usergroups.users.list) with a short cache, so a busy
incident channel does not spend its Web API rate limit on the same lookups.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Generic, TypeVar

import yaml

if TYPE_CHECKING:
    from slack_sdk.web.async_client import AsyncWebClient

ANY = "*"


@dataclass(frozen=True)
class Verdict:
    allowed: bool
    rule: str  # the rule that decided: "grants[oncall-actions]", "default: mutating denied", ...
    reason: str  # one sentence for the user
    # For an action: the break_glass rule that lets this user confirm it alone ("" when none does).
    break_glass: str = ""

    @classmethod
    def ok(cls, rule: str, reason: str = "") -> "Verdict":
        return cls(True, rule, reason)

    @classmethod
    def no(cls, rule: str, reason: str) -> "Verdict":
        return cls(False, rule, reason)


class PolicyError(ValueError):
    pass


# Slack user ids: U... in a workspace, W... for Enterprise Grid org-wide users.
SLACK_USER_ID = re.compile(r"^[UW][A-Z0-9]{2,}$")
SLACK_GROUP_ID = re.compile(r"^S[A-Z0-9]{2,}$")  # a user group (subteam)


@dataclass(frozen=True)
class TerminalUser:
    """What an OS account on the bot host stands for: a Slack user, a role (user groups), or both."""

    os_user: str
    slack_user: str | None = None
    groups: frozenset[str] = frozenset()


def _terminal_users(data: object, source: str) -> dict[str, TerminalUser]:
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise PolicyError(
            f"{source}: terminal_users: expected a mapping of OS account -> Slack user id or {{user, groups}}"
        )
    out: dict[str, TerminalUser] = {}
    for name, value in data.items():
        where = f"{source}: terminal_users[{name}]"
        if not isinstance(name, str) or not name.strip():
            raise PolicyError(f"{source}: terminal_users: OS account names must be non-empty strings")
        if isinstance(value, str):
            value = {"user": value}
        if not isinstance(value, dict):
            raise PolicyError(f"{where}: expected a Slack user id or a mapping with user and/or groups")
        unknown = set(value) - {"user", "groups"}
        if unknown:
            raise PolicyError(f"{where}: unknown field(s) {sorted(unknown)}")
        user = value.get("user")
        if user is not None and not (isinstance(user, str) and SLACK_USER_ID.match(user)):
            raise PolicyError(f"{where}: user must be a Slack user id like U0ALICE, not {user!r}")
        groups = _ids(value.get("groups"), f"{where}.groups")
        if user is None and not groups:
            raise PolicyError(f"{where}: names no Slack user and no groups")
        out[name.strip()] = TerminalUser(name.strip(), user, groups)
    return out


@dataclass(frozen=True)
class Rule:
    name: str
    users: frozenset[str] = frozenset()
    groups: frozenset[str] = frozenset()
    channels: frozenset[str] = frozenset()  # empty: any channel
    commands: frozenset[str] = frozenset()

    def matches(self, user: str, groups: set[str], channel: str | None, command: str) -> bool:
        who = user in self.users or ANY in self.users or bool(self.groups & groups)
        where = not self.channels or ANY in self.channels or channel in self.channels
        what = ANY in self.commands or command in self.commands
        return who and where and what


def _ids(value: object, where: str) -> frozenset[str]:
    if value is None:
        return frozenset()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PolicyError(f"{where}: expected a list of ids or names")
    return frozenset(v.strip() for v in value)


def _rules(items: object, kind: str) -> tuple[Rule, ...]:
    if items is None:
        return ()
    if not isinstance(items, list):
        raise PolicyError(f"{kind}: expected a list of rules")
    out: list[Rule] = []
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            raise PolicyError(f"{kind}[{i}]: expected a mapping")
        unknown = set(item) - {"name", "users", "groups", "channels", "commands"}
        if unknown:
            raise PolicyError(f"{kind}[{i}]: unknown field(s) {sorted(unknown)}")
        name = str(item.get("name") or i)
        rule = Rule(
            name,
            _ids(item.get("users"), f"{kind}[{name}].users"),
            _ids(item.get("groups"), f"{kind}[{name}].groups"),
            _ids(item.get("channels"), f"{kind}[{name}].channels"),
            frozenset(c.lower() for c in _ids(item.get("commands"), f"{kind}[{name}].commands")),
        )
        if not rule.commands:
            raise PolicyError(f"{kind}[{name}]: names no commands")
        if not (rule.users or rule.groups):
            raise PolicyError(f"{kind}[{name}]: names no users or groups")
        out.append(rule)
    return tuple(out)


@dataclass(frozen=True)
class Policy:
    channels: frozenset[str] | None = None  # None: any channel
    read_only_open: bool = True
    grants: tuple[Rule, ...] = ()
    deny: tuple[Rule, ...] = ()
    source: str = "built-in default"
    terminal_users: Mapping[str, TerminalUser] = field(default_factory=dict, hash=False)
    break_glass: tuple[Rule, ...] = ()

    @classmethod
    def from_dict(cls, data: object, source: str = "policy") -> "Policy":
        if not isinstance(data, dict):
            raise PolicyError(f"{source}: expected a mapping at the top")
        unknown = set(data) - {"channels", "read_only", "grants", "deny", "terminal_users", "break_glass"}
        if unknown:
            raise PolicyError(f"{source}: unknown field(s) {sorted(unknown)}")
        channels = _ids(data.get("channels"), "channels") if data.get("channels") is not None else None
        read_only = data.get("read_only", "open")
        if read_only not in ("open", "granted"):
            raise PolicyError(f"{source}: read_only must be 'open' or 'granted', not {read_only!r}")
        return cls(
            None if channels is None or ANY in channels else channels,
            read_only == "open",
            _rules(data.get("grants"), "grants"),
            _rules(data.get("deny"), "deny"),
            source,
            _terminal_users(data.get("terminal_users"), source),
            _rules(data.get("break_glass"), "break_glass"),
        )

    @classmethod
    def load(cls, path: Path) -> "Policy":
        try:
            data = yaml.safe_load(Path(path).read_text(encoding="utf-8")) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise PolicyError(f"cannot read the RBAC policy {path}: {exc}") from None
        return cls.from_dict(data, str(path))

    def group_ids(self) -> set[str]:
        return {g for r in (*self.grants, *self.deny, *self.break_glass) for g in r.groups}

    def approvers(self, command: str, channel: str | None) -> tuple[list[str], list[str]]:
        """Who the grants let confirm ``command`` in ``channel``: (user ids, user group ids), for a
        requester who needs a second person. Deny rules on a group's members are not resolved here:
        the approver's own confirm is checked in full."""
        command = command.lower()
        rules = [
            r
            for r in self.grants
            if (ANY in r.commands or command in r.commands)
            and (not r.channels or ANY in r.channels or channel in r.channels)
        ]
        denied = {u for r in self.deny if ANY in r.commands or command in r.commands for u in r.users}
        users = sorted({u for r in rules for u in r.users if u != ANY} - denied)
        return users, sorted({g for r in rules for g in r.groups})

    def with_break_glass(
        self, verdict: Verdict, user: str, groups: set[str], channel: str | None, command: str
    ) -> Verdict:
        """``verdict`` (an allowed action) naming the break_glass rule that lets ``user`` confirm it alone."""
        if not verdict.allowed:
            return verdict
        for rule in self.break_glass:
            if rule.matches(user, groups, channel, command.lower()):
                return dataclasses.replace(verdict, break_glass=f"break_glass[{rule.name}]")
        return verdict

    def check(self, user: str, groups: set[str], channel: str | None, command: str, mutating: bool) -> Verdict:
        """Pure: may ``user`` (member of ``groups``) run ``command`` in ``channel``? A refusal is read
        by the person refused: it names the rule and who to ask, never where the policy lives on the
        server (``source``, for the operator's own errors at load)."""
        command = command.lower()
        if self.channels is not None and channel not in self.channels:
            return Verdict.no(
                "channels",
                f"The bot does not take commands in this channel ({channel}); its access policy lists the "
                f"channels it answers in: {_some(sorted(self.channels))}.",
            )
        for rule in self.deny:
            if rule.matches(user, groups, channel, command):
                return Verdict.no(
                    f"deny[{rule.name}]",
                    f"'{command}' is denied to you by rule deny[{rule.name}] of the bot's access policy. "
                    "Ask whoever runs this bot if that is wrong.",
                )
        if not mutating and self.read_only_open:
            return Verdict.ok("read_only: open")
        for rule in self.grants:
            if rule.matches(user, groups, channel, command):
                return Verdict.ok(f"grants[{rule.name}]")
        kind = (
            "changes the cluster" if mutating else "is read-only, and this policy grants read-only commands explicitly"
        )
        return Verdict.no(
            "default: deny unless granted",
            f"'{command}' {kind}; no grant of the bot's access policy gives it to you"
            f"{' in this channel' if channel else ''}. {self._who_to_ask(command, channel, user)}",
        )

    def _who_to_ask(self, command: str, channel: str | None, user: str) -> str:
        """Whom a refused user can turn to: the people the policy already lets run ``command`` here
        (they can run it, or vouch for a grant), and whoever runs the bot, who edits the policy."""
        users, groups = self.approvers(command, channel)
        who = [u for u in users if u != user] + [f"members of user group {g}" for g in groups]
        if who:
            return f"{_some(who)} may run it here: ask one of them to run it, or ask whoever runs this bot for a grant."
        return "Nobody holds a grant for it here yet: ask whoever runs this bot to add one."


def _some(items: list[str], most: int = 5) -> str:
    """At most ``most`` items, then how many more."""
    shown = ", ".join(items[:most])
    return shown + (f" and {len(items) - most} more" if len(items) > most else "")


@dataclass
class UserFacts:
    exists: bool
    guest: bool = False
    deleted: bool = False
    bot: bool = False
    team_id: str | None = None
    error: str = ""
    enterprise_id: str | None = None  # Enterprise Grid users only


_V = TypeVar("_V")


@dataclass
class _Cached(Generic[_V]):
    value: _V
    at: float


class Directory:
    """Slack facts about users and user groups, cached for ``ttl_s`` seconds."""

    def __init__(self, client: AsyncWebClient, ttl_s: float = 300.0, clock: Callable[[], float] = time.monotonic):
        self.client = client
        self.ttl_s = ttl_s
        self.clock = clock
        self._users: dict[str, _Cached[UserFacts]] = {}
        self._groups: dict[str, _Cached[frozenset[str]]] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def _fresh_value(self, cache: dict[str, _Cached[_V]], key: str) -> _V | None:
        """The cached value for ``key`` while it is younger than ``ttl_s``, else None."""
        c = cache.get(key)
        return c.value if c is not None and self.clock() - c.at < self.ttl_s else None

    async def user(self, user_id: str) -> UserFacts:
        from slack_sdk.errors import SlackApiError

        cached = self._fresh_value(self._users, user_id)
        if cached is not None:
            return cached
        async with self._locks.setdefault(f"u:{user_id}", asyncio.Lock()):  # one lookup per user at a time
            cached = self._fresh_value(self._users, user_id)
            if cached is not None:
                return cached
            try:
                resp = await self.client.users_info(user=user_id)
                u = resp["user"]
                facts = UserFacts(
                    True,
                    bool(u.get("is_restricted") or u.get("is_ultra_restricted")),
                    bool(u.get("deleted")),
                    bool(u.get("is_bot")),
                    u.get("team_id"),
                    enterprise_id=(u.get("enterprise_user") or {}).get("enterprise_id"),
                )
            except SlackApiError as exc:
                err = slack_error_code(exc) or "error"
                if err not in ("user_not_found", "user_not_visible"):
                    raise  # a Slack outage is not "unknown user"; the caller says Slack failed
                facts = UserFacts(False, error=err)
            self._users[user_id] = _Cached(facts, self.clock())
            return facts

    async def members(self, group_id: str) -> frozenset[str]:
        """Members of a user group. A failed lookup raises (and is not cached): an unreadable group
        must not silently turn a deny rule off."""
        cached = self._fresh_value(self._groups, group_id)
        if cached is not None:
            return cached
        async with self._locks.setdefault(f"g:{group_id}", asyncio.Lock()):
            cached = self._fresh_value(self._groups, group_id)
            if cached is not None:
                return cached
            resp = await self.client.usergroups_users_list(usergroup=group_id)
            members = frozenset(resp.get("users") or [])
            self._groups[group_id] = _Cached(members, self.clock())
            return members

    async def groups_of(self, user_id: str, group_ids: Iterable[str]) -> set[str]:
        ids = sorted(group_ids)
        memberships = await asyncio.gather(*(self.members(g) for g in ids))
        return {g for g, m in zip(ids, memberships) if user_id in m}


@dataclass
class Authorizer:
    """The policy plus the directory: the one place a Slack request is allowed or refused."""

    policy: Policy
    directory: Directory
    allowed_team_ids: frozenset[str] = frozenset()
    allowed_api_app_ids: frozenset[str] = frozenset()
    allowed_enterprise_ids: frozenset[str] = frozenset()

    def origin(self, team_id: str | None, api_app_id: str | None, enterprise_id: str | None = None) -> Verdict:
        """Pure and cheap: checked on the ack path, before any Web API call."""
        if self.allowed_enterprise_ids and enterprise_id not in self.allowed_enterprise_ids:
            return Verdict.no(
                "KBOT_ALLOWED_ENTERPRISE_IDS",
                f"This bot does not serve Enterprise Grid org {enterprise_id or 'none (not a Grid workspace)'}.",
            )
        if self.allowed_team_ids and team_id not in self.allowed_team_ids:
            return Verdict.no("KBOT_ALLOWED_TEAM_IDS", f"This bot does not serve workspace {team_id or 'unknown'}.")
        if self.allowed_api_app_ids and api_app_id not in self.allowed_api_app_ids:
            return Verdict.no(
                "KBOT_ALLOWED_API_APP_IDS", f"Requests from app {api_app_id or 'unknown'} are not accepted."
            )
        return Verdict.ok("origin")

    async def identity(self, user_id: str | None) -> Verdict:
        if not user_id:
            return Verdict.no("identity", "The request names no user.")
        facts = await self.directory.user(user_id)
        if not facts.exists:
            return Verdict.no("identity: unknown user", f"Slack does not know user {user_id} ({facts.error}).")
        if facts.deleted:
            return Verdict.no("identity: deactivated", "Deactivated accounts cannot use the bot.")
        if facts.guest:
            return Verdict.no("identity: guest", "Guest accounts (single- or multi-channel guests) cannot use the bot.")
        if facts.bot:
            return Verdict.no("identity: bot", "Other bots cannot use this bot.")
        if self.allowed_team_ids and facts.team_id and facts.team_id not in self.allowed_team_ids:
            return Verdict.no("KBOT_ALLOWED_TEAM_IDS", f"Users from workspace {facts.team_id} cannot use this bot.")
        if (
            self.allowed_enterprise_ids
            and facts.enterprise_id
            and facts.enterprise_id not in self.allowed_enterprise_ids
        ):
            return Verdict.no(
                "KBOT_ALLOWED_ENTERPRISE_IDS",
                f"Users from Enterprise Grid org {facts.enterprise_id} cannot use this bot.",
            )
        return Verdict.ok("identity")

    async def command(self, user_id: str, channel: str | None, command: str, mutating: bool) -> Verdict:
        from slack_sdk.errors import SlackApiError

        try:
            groups = (
                await self.directory.groups_of(user_id, self.policy.group_ids()) if self.policy.group_ids() else set()
            )
        except SlackApiError as exc:  # fail closed: group rules can neither grant nor deny unseen
            err = slack_error_code(exc) or str(exc)
            return Verdict.no(
                "groups: Slack error", f"Could not read user group membership from Slack ({err}); try again."
            )
        verdict = self.policy.check(user_id, groups, channel, command, mutating)
        return self.policy.with_break_glass(verdict, user_id, groups, channel, command) if mutating else verdict

    async def for_action(self, user_id: str, channel: str | None, command: str) -> Verdict:
        """The gate's question at confirm / cancel time: may this user act on ``command``?"""
        identity = await self.identity(user_id)
        if not identity.allowed:
            return identity
        return await self.command(user_id, channel, command, mutating=True)


def slack_error_code(exc: BaseException) -> str | None:
    """Slack's error code from its JSON answer; None when the body is not Slack's JSON (a proxy's
    plain-text or HTML 5xx), where ``response.get`` would raise."""
    data = getattr(getattr(exc, "response", None), "data", None)
    return str(data["error"]) if isinstance(data, dict) and data.get("error") else None
