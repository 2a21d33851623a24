"""Turn `/kafka ...` text into a CommandRequest, or a BadInput that says what to type instead.

Text is parsed like a shell line (shlex), after undoing what Slack does to typed text: smart
quotes, `--` turned into an em dash, and HTML-escaped `& < >`. Subcommand words match
case-insensitively; arguments keep their case because Kafka topic names are case-sensitive.
"""

from __future__ import annotations

import html
import re
import shlex

from rapidfuzz import fuzz, process

from .spec import ArgValue, Command, CommandRequest, Param

MAX_INPUT_CHARS = 4000
MAX_NAME_CHARS = 249  # Kafka's limit for topic names (Topic.MAX_NAME_LENGTH)

_SMART = str.maketrans({"\u201c": '"', "\u201d": '"', "\u201e": '"', "\u2018": "'", "\u2019": "'", "\u00a0": " "})
# Slack turns a typed "--" into an em dash (and some keyboards type an en dash).
_DASHES = re.compile(r"(?<!\S)[\u2014\u2013](?=\S)")
# Control characters other than tab / newline / carriage return, and Unicode bidi overrides.
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\u202a-\u202e\u2066-\u2069]")
_TOPIC = re.compile(r"^[A-Za-z0-9._-]+$")
_GROUP = re.compile(r"^[A-Za-z0-9._:@+=/-]+$")

GLOBAL_FLAGS = ("json", "full", "cluster", "help")


class BadInput(Exception):
    """Input we will not run; ``suggestions`` are commands the user probably meant."""

    def __init__(self, message: str, suggestions: list[str] | None = None):
        super().__init__(message)
        self.message = message
        self.suggestions = suggestions or []


def normalize(text: str) -> str:
    if text is None or not text.strip():
        raise BadInput("Empty command.", ["help"])
    if len(text) > MAX_INPUT_CHARS:
        raise BadInput(f"Command is {len(text):,} characters long; the limit is {MAX_INPUT_CHARS:,}.", ["help"])
    if _CONTROL.search(text):
        raise BadInput("Command contains control characters; type it as plain text.", ["help"])
    text = html.unescape(text.translate(_SMART))
    text = _DASHES.sub("--", text)
    text = text.strip()
    if text.lower().startswith("/kafka"):
        text = text[len("/kafka") :].strip()
    return text


def tokenize(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError as exc:  # unbalanced quotes
        raise BadInput(f"Could not read the command: {exc}. Check the quotes.") from None


def check_topic(name: str) -> str:
    if name in (".", ".."):
        raise BadInput(f"'{name}' is not a valid topic name.")
    if len(name) > MAX_NAME_CHARS:
        raise BadInput(f"Topic names are at most {MAX_NAME_CHARS} characters; this one has {len(name)}.")
    if name.startswith("-") or not _TOPIC.match(name):
        raise BadInput(f"'{_clip(name)}' is not a valid topic name: use letters, digits, '.', '_' and '-' (not first).")
    return name


def check_group(name: str) -> str:
    if len(name) > MAX_NAME_CHARS:
        raise BadInput(f"Group ids here are at most {MAX_NAME_CHARS} characters; this one has {len(name)}.")
    if name.startswith("-") or not _GROUP.match(name):
        raise BadInput(f"'{_clip(name)}' is not a group id this bot accepts: letters, digits and . _ - : @ + = /.")
    return name


def _clip(s: str, n: int = 60) -> str:
    return s if len(s) <= n else s[: n - 1] + "…"


def _convert(param_or_kind: str, name: str, value: str) -> ArgValue:
    if param_or_kind == "int":
        try:
            return int(value)
        except ValueError:
            raise BadInput(f"'{name}' must be a whole number, got '{_clip(value)}'.") from None
    if param_or_kind == "topic":
        return check_topic(value)
    if param_or_kind == "group":
        return check_group(value)
    return value


class Router:
    def __init__(self, commands: list[Command]):
        self.commands = commands
        # Longest words first so "throttle set" wins over a hypothetical "throttle".
        self._by_words = sorted(commands, key=lambda c: len(c.spec.words), reverse=True)

    def names(self) -> list[str]:
        return [c.spec.name for c in self.commands]

    def find(self, name: str) -> Command | None:
        words = tuple(name.lower().split())
        return next((c for c in self.commands if c.spec.words == words), None)

    def closest(self, text: str, limit: int = 3) -> list[str]:
        found = process.extract(text.lower(), self.names(), scorer=fuzz.WRatio, limit=limit, score_cutoff=50)
        return [name for name, _score, _i in found]

    def parse(self, text: str) -> CommandRequest:
        tokens = tokenize(normalize(text))
        if not tokens:
            raise BadInput("Empty command.", ["help"])
        lowered = [t.lower() for t in tokens]
        command = next((c for c in self._by_words if tuple(lowered[: len(c.spec.words)]) == c.spec.words), None)
        if command is None:
            guess = " ".join(lowered[:2])
            raise BadInput(f"Unknown command '{_clip(tokens[0])}'.", self.closest(guess) or ["help"])
        request = CommandRequest(command=command, raw=text, router=self)
        self._bind(request, tokens[len(command.spec.words) :])
        return request

    def _bind(self, request: CommandRequest, tokens: list[str]) -> None:
        spec = request.spec
        options = {o.name: o for o in spec.options}
        positional: list[str] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            if tok in ("-h", "--help"):
                request.options["help"] = True
            elif tok == "--json":
                request.json = True
            elif tok == "--full":
                request.full = True
            elif tok.startswith("--"):
                name, eq, inline = tok[2:].partition("=")
                name = name.lower()
                if name == "cluster" or name in options:
                    takes = name == "cluster" or options[name].takes_value
                    if takes and not eq:
                        if i + 1 >= len(tokens):
                            raise BadInput(f"--{name} needs a value.", [spec.usage()])
                        i += 1
                        inline = tokens[i]
                    if name == "cluster":
                        request.cluster = inline
                    else:
                        request.options[name] = _convert(options[name].kind, name, inline) if takes else True
                else:
                    # `runbook URP --since 30m`: say which commands take it instead of only refusing.
                    others = [c.spec.usage() for c in self._by_words if any(o.name == name for o in c.spec.options)]
                    hint = f" It belongs to {', '.join(c.split()[0] for c in others[:3])}." if others else ""
                    raise BadInput(
                        f"Unknown option '--{_clip(name, 40)}' for '{spec.name}'.{hint}", [spec.usage(), *others[:2]]
                    )
            elif tok.startswith("-") and not _is_number(tok):
                raise BadInput(f"Arguments may not start with '-': '{_clip(tok)}'.", [spec.usage()])
            else:
                positional.append(tok)
            i += 1
        if request.options.get("help"):
            return
        self._bind_positional(request, spec.params, positional)

    def _bind_positional(self, request: CommandRequest, params: tuple[Param, ...], values: list[str]) -> None:
        spec = request.spec
        for p in params:
            if p.rest:
                if values:
                    request.args[p.name] = " ".join(values)
                    values = []
                elif p.required:
                    raise BadInput(f"'{spec.name}' needs {p.name}: {p.help}", [spec.usage()])
                continue
            if not values:
                if p.required:
                    raise BadInput(f"'{spec.name}' needs {p.name}: {p.help}", [spec.usage()])
                continue
            request.args[p.name] = _convert(p.kind, p.name, values.pop(0))
        if values:
            raise BadInput(f"Unexpected argument '{_clip(values[0])}' for '{spec.name}'.", [spec.usage()])


def _is_number(tok: str) -> bool:
    return bool(re.fullmatch(r"-\d+", tok))
