"""How a subcommand declares itself: its words, parameters, help and whether it changes the cluster."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, Protocol

if TYPE_CHECKING:
    from framework.actions import ActionSpec
    from framework.context import Context
    from framework.reply import Reply
    from framework.router import Router

ParamKind = Literal["text", "topic", "group", "int", "word"]


@dataclass(frozen=True)
class Param:
    name: str
    help: str
    kind: ParamKind = "word"
    required: bool = True
    rest: bool = False  # takes every remaining word (free text)


@dataclass(frozen=True)
class Option:
    """A --flag. ``takes_value`` options read the next word as their value."""

    name: str  # without the dashes
    help: str
    takes_value: bool = True
    kind: ParamKind = "word"


@dataclass(frozen=True)
class CommandSpec:
    words: tuple[str, ...]  # ("why",) or ("throttle", "set")
    summary: str
    params: tuple[Param, ...] = ()
    options: tuple[Option, ...] = ()
    mutating: bool = False
    examples: tuple[str, ...] = ()
    details: str = ""

    @property
    def name(self) -> str:
        return " ".join(self.words)

    def usage(self) -> str:
        parts = [self.name]
        for p in self.params:
            token = f"<{p.name}>" + ("..." if p.rest else "")
            parts.append(token if p.required else f"[{token}]")
        for o in self.options:
            parts.append(f"[--{o.name}{' <' + o.name + '>' if o.takes_value else ''}]")
        return " ".join(parts)


class Referents(Protocol):
    """What a follow-up's words may refer to (framework/followup.py): the router asks it while it
    binds a request, so remembered values are bound on the request, never pasted into the text."""

    def refer(self, words: Sequence[str], spec: CommandSpec, name: str, kind: ParamKind) -> tuple[int, ArgValue] | None:
        """(how many of ``words`` refer, the value they refer to) when the first of ``words`` point
        at something remembered ("it", "the topic"); None when they are an ordinary value."""
        ...

    def missing(self, spec: CommandSpec, param: Param) -> ArgValue | None:
        """The remembered value for a parameter the user left out, or None."""
        ...


Runner = Callable[["CommandRequest", "Context"], Awaitable["Reply"]]
# What the router binds to a parameter or option: its text, a whole number (kind "int"), or True
# for an option that takes no value.
ArgValue = str | int | bool


@dataclass(frozen=True)
class Command:
    spec: CommandSpec
    run: Runner | None = None  # read-only commands answer here
    action: "ActionSpec | None" = None  # mutating commands plan here; the gate executes

    def __post_init__(self) -> None:
        if self.spec.mutating != (self.action is not None) or (self.run is None) == (self.action is None):
            raise ValueError(
                f"{self.spec.name}: a mutating command has an action and no run; a read-only one the reverse"
            )


@dataclass
class CommandRequest:
    command: Command
    args: dict[str, ArgValue] = field(default_factory=dict)
    options: dict[str, ArgValue] = field(default_factory=dict)
    raw: str = ""
    json: bool = False
    full: bool = False  # --full: the whole runbook form instead of the short answer
    cluster: str | None = None
    user: str | None = None  # Slack user id, or the local user on a terminal
    channel: str | None = None
    router: "Router | None" = None  # the router that parsed this request: `help` lists its commands
    # What a follow-up took from its thread's memory (framework/followup.py), as the one note line
    # the answer carries ("From this thread: topic orders, window 30m"); None when nothing was.
    context_note: str | None = None

    @property
    def spec(self) -> CommandSpec:
        return self.command.spec

    def arg_text(self, name: str) -> str | None:
        """A positional argument as text; None when it was not given."""
        return _text(self.args.get(name))

    def option_text(self, name: str) -> str | None:
        """An option's value as text; None when it was not given."""
        return _text(self.options.get(name))

    def option_int(self, name: str) -> int | None:
        """A whole-number option (kind "int": the router already converted it); None when not given."""
        value = self.options.get(name)
        return None if value is None else int(value)


def _text(value: ArgValue | None) -> str | None:
    return None if value is None else str(value)
