"""Who is at the terminal: the OS account this process runs as, mapped through the RBAC policy.

``$USER`` and ``$LOGNAME`` are whatever the caller typed (``USER=U0BOB kbot ask "confirm ..."``),
so they name nobody. The terminal's identity is the account of the process uid
(``pwd.getpwuid(os.getuid())``), and what that account may approve is written in the policy's
``terminal_users`` section (gate/rbac.py):

    mapped      it acts as that Slack user (and/or a member of the listed user groups): the same
                grants, deny rules and self-approval rule as in Slack, so Alice at the terminal
                cannot second-approve her own Slack request
    unmapped    it acts as ``terminal:<account>``: read-only commands, and confirming or cancelling
                actions it requested itself from the terminal; approving anything requested from
                Slack is refused with one line saying which policy line to add

The gate asks ``TerminalAuthorizer`` at confirm / cancel time, as it asks rbac.Authorizer for Slack.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import pwd
from dataclasses import dataclass
from typing import Any

from bot.slack_settings import SlackSettings
from gate.rbac import Authorizer, Directory, Policy, PolicyError, TerminalUser, Verdict, slack_error_code

log = logging.getLogger(__name__)

TERMINAL_PREFIX = "terminal:"  # never a Slack id, so an unmapped account cannot pose as a Slack user


def os_account() -> tuple[str, int]:
    """(account name, uid) of this process; a uid without a passwd entry (containers) is named by number."""
    uid = os.getuid()
    try:
        return pwd.getpwuid(uid).pw_name, uid
    except KeyError:
        return f"uid-{uid}", uid


@dataclass(frozen=True)
class TerminalIdentity:
    os_user: str
    uid: int
    mapping: TerminalUser | None = None

    @property
    def mapped(self) -> bool:
        return self.mapping is not None

    @property
    def user(self) -> str:
        """The requester / approver name the gate records for this terminal."""
        if self.mapping is not None and self.mapping.slack_user:
            return self.mapping.slack_user
        return TERMINAL_PREFIX + self.os_user

    def audit_fields(self) -> dict[str, Any]:
        return {
            "os_user": self.os_user,
            "uid": self.uid,
            "terminal_mapping": "terminal_users" if self.mapped else "unmapped",
        }


def load_policy(settings: SlackSettings) -> tuple[Policy, str]:
    """The RBAC policy and, when it cannot be read, why (the terminal then acts unmapped)."""
    if settings.rbac_file is None:
        return Policy(), ""
    try:
        return Policy.load(settings.rbac_file), ""
    except PolicyError as exc:
        return Policy(), str(exc)


class TerminalAuthorizer:
    """The gate's ``authorize`` for the terminal: (user, channel, record) -> Verdict."""

    def __init__(
        self,
        identity: TerminalIdentity,
        policy: Policy,
        *,
        policy_error: str = "",
        settings: SlackSettings | None = None,
    ):
        self.identity, self.policy, self.policy_error = identity, policy, policy_error
        self.settings = settings
        self._directory: Directory | None = None

    @classmethod
    def from_settings(cls, settings: SlackSettings) -> "TerminalAuthorizer":
        policy, error = load_policy(settings)
        name, uid = os_account()
        return cls(
            TerminalIdentity(name, uid, policy.terminal_users.get(name)), policy, policy_error=error, settings=settings
        )

    def _how_to_map(self) -> str:
        where = (
            f"the RBAC policy ({self.settings.rbac_file})"
            if self.settings and self.settings.rbac_file
            else "an RBAC policy file (KBOT_RBAC_FILE)"
        )
        broken = f" (the policy could not be read: {self.policy_error})" if self.policy_error else ""
        return f"add `{self.identity.os_user}: <your Slack user id>` under terminal_users in {where}{broken}"

    def directory(self) -> Directory | None:
        """Slack, when this host has a bot token: for the mapped user's account state and user groups."""
        if self._directory is None and self.settings is not None and self.settings.bot_token:
            from slack_sdk.web.async_client import AsyncWebClient

            self._directory = Directory(
                AsyncWebClient(token=self.settings.bot_token, base_url=self.settings.api_url, timeout=30)
            )
        return self._directory

    async def __call__(self, user: str, channel: str | None, record) -> Verdict:
        me = self.identity
        if user != me.user:
            return Verdict.no(
                "terminal identity", f"This terminal acts as {me.user} (OS account {me.os_user}), not {user}."
            )
        if not me.mapped:
            if record.requester == me.user:
                return Verdict.ok("terminal: own request")
            return Verdict.no(
                "terminal_users",
                f"OS account '{me.os_user}' is not mapped to a Slack user, so it may only confirm actions "
                f"it requested from this terminal (this one was requested by {record.requester}); "
                f"to approve from the terminal, {self._how_to_map()}.",
            )
        mapping = me.mapping
        rule = f"terminal_users[{me.os_user}]"
        groups = set(mapping.groups)
        directory = self.directory() if mapping.slack_user else None
        if directory is not None:
            auth = Authorizer(self.policy, directory)
            try:
                account = await auth.identity(mapping.slack_user)
                if not account.allowed:
                    return Verdict.no(f"{rule} -> {account.rule}", account.reason)
                if self.policy.group_ids():
                    groups |= await directory.groups_of(mapping.slack_user, self.policy.group_ids())
            except Exception as exc:  # Slack refused or is unreachable: fail closed, as the Slack side does
                err = slack_error_code(exc) or str(exc) or type(exc).__name__  # a proxy's text body has no code
                return Verdict.no(
                    f"{rule} -> Slack error", f"Could not check {mapping.slack_user} with Slack ({err}); try again."
                )
        # An action requested from the terminal has no channel: channel lists and channel-bound
        # grants speak about Slack channels, so they cannot grant it (or refuse it for being nowhere).
        policy = self.policy if record.channel is not None else dataclasses.replace(self.policy, channels=None)
        verdict = policy.check(me.user, groups, record.channel, record.command, mutating=True)
        verdict = policy.with_break_glass(verdict, me.user, groups, record.channel, record.command)
        return dataclasses.replace(verdict, rule=f"{rule} -> {verdict.rule}")


def terminal_identity(settings: SlackSettings) -> TerminalIdentity:
    return TerminalAuthorizer.from_settings(settings).identity


def terminal_user(settings: SlackSettings) -> str:
    """The user the terminal acts as (the terminal's gate, bot/gate_setup.py, names it on every command)."""
    return terminal_identity(settings).user
