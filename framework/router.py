"""Turn `/kafka ...` text into a CommandRequest, or a BadInput that says what to type instead.

First what Slack does to typed text is undone: smart quotes, `--` turned into an em dash, and
HTML-escaped `& < >`. Subcommand words match case-insensitively; arguments keep their case because
Kafka topic names are case-sensitive. What follows the subcommand is read one of two ways:

- A command whose last parameter is free text (`why`, `runbook`, `triage`, `help`) takes the
  user's words as written, apostrophes, dashes and pasted terminal lines included
  (`why the broker's disk is full`, `why kafka-topics --describe shows Leader: none`). Options are
  read only where they cannot be part of the words: the command's own options and the global flags
  (`--json`, `--full`, `--help`/`-h`, `--cluster NAME`) as the last words, or right after the
  subcommand, where options have always gone (there a word that looks like an unknown option is
  refused, as for every command).
- Every other command is read like a shell line (shlex); unbalanced quotes fall back to splitting
  on spaces, so an apostrophe never stops the parse (the argument checks then say what is wrong).
"""

from __future__ import annotations

import html
import re
import shlex

from rapidfuzz import fuzz, process

from framework.spec import ArgValue, Command, CommandRequest, CommandSpec, Param, Referents

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
    """Shell-like words; with unbalanced quotes (an apostrophe: "broker's") the words between spaces."""
    try:
        return shlex.split(text)
    except ValueError:  # an apostrophe or a stray quote is part of what was typed, not an error
        return text.split()


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

    def command_for(self, text: str) -> Command | None:
        """The command ``text`` starts with, or None (a thread's chatter: "thanks, looking")."""
        try:
            line = normalize(text)
        except BadInput:
            return None
        return self._command(line)

    def _command(self, line: str) -> Command | None:
        lowered = [w.group().lower() for w in _WORD.finditer(line)]
        return next((c for c in self._by_words if tuple(lowered[: len(c.spec.words)]) == c.spec.words), None)

    def parse(self, text: str, referents: Referents | None = None) -> CommandRequest:
        """``referents``: what a follow-up in a thread may refer to ("describe it"), and the
        remembered values of parameters left out (framework/followup.py); None reads the text alone."""
        line = normalize(text)
        # The subcommand is found among the words between spaces: quoting never matters for it, and
        # the rest of the line is read according to the command it names.
        words = list(_WORD.finditer(line))
        if not words:
            raise BadInput("Empty command.", ["help"])
        command = self._command(line)
        if command is None:
            guess = " ".join(w.group().lower() for w in words[:2])
            raise BadInput(f"Unknown command '{_clip(words[0].group())}'.", self.closest(guess) or ["help"])
        request = CommandRequest(command=command, raw=text, router=self)
        rest = line[words[len(command.spec.words) - 1].end() :]
        if _takes_free_text(command.spec):
            self._bind_free_text(request, rest, referents)
        else:
            self._bind(request, tokenize(rest), referents)
        return request

    # ---- options ----------------------------------------------------------------------------

    def _known(self, spec: CommandSpec, word: str) -> tuple[str, bool] | None:
        """(option name, takes a value) when ``word`` is one of the command's options or a global
        flag (``--name`` or ``--name=value``), else None."""
        if word in ("-h", "--help"):
            return "help", False
        if not word.startswith("--"):
            return None
        name = word[2:].partition("=")[0].lower()
        if name in ("json", "full", "help"):
            return name, False
        if name == "cluster":
            return name, True
        option = next((o for o in spec.options if o.name == name), None)
        return None if option is None else (name, option.takes_value)

    def _set(self, request: CommandRequest, name: str, value: str | None, referents: Referents | None = None) -> None:
        """Record option ``name`` (its value when it takes one) on the request; a value that refers
        to the thread's memory (``--topic it``) is bound to what it refers to."""
        if name == "help":
            request.options["help"] = True
        elif name == "json":
            request.json = True
        elif name == "full":
            request.full = True
        elif name == "cluster":
            request.cluster = value
        else:
            option = next(o for o in request.spec.options if o.name == name)
            found = referents.refer([value], request.spec, name, option.kind) if referents and value else None
            if found is not None:
                request.options[name] = found[1]
            else:
                request.options[name] = _convert(option.kind, name, value) if value is not None else True

    def _unknown_option(self, spec: CommandSpec, word: str) -> BadInput:
        name = word[2:].partition("=")[0].lower()
        # `runbook URP --since 30m`: say which commands take it instead of only refusing.
        others = [c.spec.usage() for c in self._by_words if any(o.name == name for o in c.spec.options)]
        hint = f" It belongs to {', '.join(c.split()[0] for c in others[:3])}." if others else ""
        return BadInput(f"Unknown option '--{_clip(name, 40)}' for '{spec.name}'.{hint}", [spec.usage(), *others[:2]])

    # ---- shell-like commands ----------------------------------------------------------------

    def _bind(self, request: CommandRequest, tokens: list[str], referents: Referents | None = None) -> None:
        spec = request.spec
        positional: list[str] = []
        i = 0
        while i < len(tokens):
            tok = tokens[i]
            known = self._known(spec, tok)
            if known is not None:
                name, takes = known
                _, eq, inline = tok.partition("=")
                value: str | None = None
                if takes:
                    if not eq:
                        if i + 1 >= len(tokens):
                            raise BadInput(f"--{name} needs a value.", [spec.usage()])
                        i += 1
                        inline = tokens[i]
                    value = inline
                self._set(request, name, value, referents)
            elif tok.startswith("--"):
                raise self._unknown_option(spec, tok)
            elif tok.startswith("-") and not _is_number(tok):
                raise BadInput(f"Arguments may not start with '-': '{_clip(tok)}'.", [spec.usage()])
            else:
                positional.append(tok)
            i += 1
        if request.options.get("help"):
            return
        self._bind_positional(request, spec.params, positional, referents)

    # ---- free-text commands -----------------------------------------------------------------

    def _bind_free_text(self, request: CommandRequest, rest: str, referents: Referents | None = None) -> None:
        """The words after the subcommand as written; options only before them or as the last words."""
        spec = request.spec
        words = list(_WORD.finditer(rest))
        i, j = 0, len(words)
        # Right after the subcommand: where options have always gone (`runbook --json hanging`).
        while i < j:
            word = words[i].group()
            known = self._known(spec, word)
            if known is None:
                if word == "--" or not word.startswith("-") or _is_number(word):
                    break
                if word.startswith("--"):
                    raise self._unknown_option(spec, word)
                raise BadInput(f"Arguments may not start with '-': '{_clip(word)}'.", [spec.usage()])
            name, takes = known
            _, eq, inline = word.partition("=")
            value: str | None = None
            if takes and not eq:
                if i + 1 >= j:
                    raise BadInput(f"--{name} needs a value.", [spec.usage()])
                i += 1
                inline = words[i].group()
            if takes:
                value = _unquote(inline)
            self._set(request, name, value, referents)
            i += 1
        # The last words: `why URP --since 1h --cluster prod`, `why the broker's disk is full --json`.
        while j > i:
            word = words[j - 1].group()
            known = self._known(spec, word)
            if known is not None:
                name, takes = known
                _, eq, inline = word.partition("=")
                if takes and not eq:
                    raise BadInput(f"--{name} needs a value.", [spec.usage()])
                self._set(request, name, _unquote(inline) if takes else None, referents)
                j -= 1
                continue
            before = self._known(spec, words[j - 2].group()) if j - 2 >= i else None
            if before is not None and before[1] and "=" not in words[j - 2].group() and not word.startswith("--"):
                self._set(request, before[0], _unquote(word), referents)
                j -= 2
                continue
            break
        if request.options.get("help"):
            return
        text = " ".join(rest[words[i].start() : words[j - 1].end()].split()) if i < j else ""
        params = spec.params
        values: list[str] = []
        # Parameters before the free text (none today) take its first words.
        for _p in params[:-1]:
            head, _, text = text.partition(" ")
            if head:
                values.append(_unquote(head))
        self._bind_positional(request, params[:-1], values, referents)
        text = _unquote(text)
        free = params[-1]
        found = referents.refer(text.split(), spec, free.name, free.kind) if referents and text else None
        if found is not None and found[0] == len(text.split()):  # the whole text refers: `runbook that`
            request.args[free.name] = found[1]
        elif text:
            request.args[free.name] = text
        elif free.required:
            raise BadInput(f"'{spec.name}' needs {free.name}: {free.help}", [spec.usage()])

    def _bind_positional(
        self, request: CommandRequest, params: tuple[Param, ...], values: list[str], referents: Referents | None = None
    ) -> None:
        spec = request.spec
        for p in params:
            if p.rest:
                if values:
                    request.args[p.name] = " ".join(values)
                    values = []
                elif p.required:
                    raise BadInput(f"'{spec.name}' needs {p.name}: {p.help}", [spec.usage()])
                continue
            found = referents.refer(values, spec, p.name, p.kind) if referents and values else None
            if found is not None:  # `describe it`, `lag that group`
                request.args[p.name] = found[1]
                values = values[found[0] :]
                continue
            if not values:
                remembered = referents.missing(spec, p) if referents else None
                if remembered is not None:
                    request.args[p.name] = remembered
                    continue
                if p.required:
                    raise BadInput(f"'{spec.name}' needs {p.name}: {p.help}", [spec.usage()])
                continue
            request.args[p.name] = _convert(p.kind, p.name, values.pop(0))
        if values:
            raise BadInput(f"Unexpected argument '{_clip(values[0])}' for '{spec.name}'.", [spec.usage()])


_WORD = re.compile(r"\S+")


def _takes_free_text(spec: CommandSpec) -> bool:
    """A command whose last parameter takes the rest of the line as text (why, runbook, triage, help)."""
    return bool(spec.params) and spec.params[-1].rest and spec.params[-1].kind == "text"


def _unquote(text: str) -> str:
    """Text without one pair of quotes around all of it ('"under min isr"'); quotes inside stay."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"" and text[0] not in text[1:-1]:
        return text[1:-1].strip()
    return text


def _is_number(tok: str) -> bool:
    return bool(re.fullmatch(r"-\d+", tok))
