"""Render a Reply for the terminal: text (short by default, ``full=True`` the long runbook form)
and JSON; and the pieces every renderer shares (table cells, sparklines, the lake's addition).

The answer's order is bot/layout.py's: verdict, do now beside the "do not" warnings, evidence, why,
other causes, more. Slack's Block Kit form is bot/render_slack.py.
"""

from __future__ import annotations

import json
from pathlib import Path

from bot.layout import EVIDENCE_ROWS, SECTION_LINES, SEVERITY_WORD, ShortAnswer, first_sentence, localize, short_answer
from framework.reply import Reply, Section, Series, Table
from framework.sources import summary as sources_summary


def slack_escape(text: object) -> str:
    """Slack's mrkdwn escaping: only &, < and > are control characters."""
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


class _Templates:
    """The Jinja templates of the full form, loaded on first use: a one-shot `kbot ask` that prints
    a short answer never pays for importing Jinja."""

    def __init__(self):
        self._env = None

    def get_template(self, name: str):
        if self._env is None:
            from jinja2 import Environment, FileSystemLoader, StrictUndefined

            self._env = Environment(
                loader=FileSystemLoader(Path(__file__).parent / "templates"),
                undefined=StrictUndefined,
                keep_trailing_newline=False,
                autoescape=False,  # Slack mrkdwn is not HTML; the `esc` filter applies Slack's own escaping
            )
            self._env.filters["esc"] = slack_escape
            self._env.filters["sources"] = sources_summary
        return self._env.get_template(name)


TEMPLATES = _Templates()


# ---- values --------------------------------------------------------------------------------------


def fmt_cell(value: object) -> str:
    """A table value for people: thousands separators, at most two decimals; JSON keeps the number."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.2f}".rstrip("0").rstrip(".")
    return str(value)


def numeric_columns(table: Table) -> list[bool]:
    def numeric(i: int) -> bool:
        values = [r[i] for r in table.rows if r[i] is not None]
        return bool(values) and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)

    return [numeric(i) for i in range(len(table.columns))]


SPARK_BARS = "▁▂▃▄▅▆▇█"


def sparkline(values: list[float]) -> str:
    if not values:
        return ""
    lo, hi = min(values), max(values)
    span = hi - lo
    return "".join(
        SPARK_BARS[0 if span == 0 else min(len(SPARK_BARS) - 1, int((v - lo) / span * len(SPARK_BARS)))] for v in values
    )


def series_line(series: Series) -> str:
    """One line for a terminal: the shape, the range and the latest value."""
    values = [v for _t, v in series.points]
    # one line per broker reads the same without the broker's name: the label names it
    title = f"{series.title}, {series.label}" if series.label and series.label not in series.title else series.title
    if not values:
        return f"{title}: no data"
    first, last = series.points[0][0], series.points[-1][0]
    return (
        f"{title}: {sparkline(values[-60:])}  {fmt_cell(min(values))}..{fmt_cell(max(values))} {series.unit}, "
        f"now {fmt_cell(values[-1])}  ({first[11:16]}-{last[11:16]} UTC)"
    )


# ---- terminal ------------------------------------------------------------------------------------

TEXT_MARK = {"ok": "+", "bad": "!", "neutral": "-"}  # an evidence line's status in plain text

_ANSI = {
    "critical": "\033[1;31m",
    "warning": "\033[1;33m",
    "ok": "\033[1;32m",
    "error": "\033[1;31m",
    "unknown": "\033[1;35m",
    "info": "\033[1m",
    "warn": "\033[31m",
    "dim": "\033[2m",
    "bold": "\033[1m",
}
_RESET = "\033[0m"


class _Paint:
    def __init__(self, color: bool):
        self.color = color

    def __call__(self, style: str, text: str) -> str:
        return f"{_ANSI[style]}{text}{_RESET}" if self.color and style in _ANSI else text


def table_lines(table: Table, indent: str = "  ") -> list[str]:
    numeric = numeric_columns(table)
    cells = [[fmt_cell(v) for v in row] for row in table.rows]
    widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(table.columns)]

    def line(values: list[str]) -> str:
        return (
            indent + "  ".join(v.rjust(w) if num else v.ljust(w) for v, w, num in zip(values, widths, numeric)).rstrip()
        )

    out = [table.title, line(table.columns)] + [line(r) for r in cells]
    if table.more:
        out.append(f"{indent}(+{table.more:,} more rows)")
    return out


def _evidence_lines(reply: Reply, limit: int | None) -> list[str]:
    shown = reply.evidence if limit is None else reply.evidence[:limit]
    if not shown:
        return []
    width = min(32, max(len(e.label) for e in shown))
    out = ["Evidence"] + [f"  {TEXT_MARK[e.status]} {e.label.ljust(width)}  {e.value}  ({e.source})" for e in shown]
    if len(reply.evidence) > len(shown):
        out.append(f"  (+{len(reply.evidence) - len(shown)} more: add --full)")
    return out


def _section_lines(section: Section, limit: int | None) -> list[str]:
    shown = section.lines if limit is None else section.lines[:limit]
    out = [section.heading] + [f"  {line}" for line in shown]
    if len(section.lines) > len(shown):
        out.append(f"  (+{len(section.lines) - len(shown)} more: add --full)")
    return out


def _short_text(reply: Reply, short: ShortAnswer, paint: _Paint) -> list[str]:
    sev = SEVERITY_WORD.get(reply.severity, reply.severity.upper())
    # An informational answer (help, a runbook entry) has no severity worth a tag.
    out = [
        paint("bold", reply.title)
        if reply.severity == "info"
        else f"{paint(reply.severity, f'[{sev}]')} {paint('bold', reply.title)}"
    ]
    if reply.verdict:
        out.append(reply.verdict)
    if reply.window:
        out.append(paint("dim", f"Window: {reply.window}"))
    out += [paint("warn", f"Missing from this answer: {m}") for m in reply.missing]
    if reply.sources:
        out.append(paint("dim", f"Sources: {sources_summary(reply.sources)}"))
    if short.heading:
        out += ["", paint("bold", short.heading)]
        for n, step in enumerate(short.steps, 1):
            out.append(f"  {n}. {step.text}")
            if step.command:
                out.append(f"     $ {step.command}")
            out += [f"     {k}={v}" for k, v in (step.config or {}).items()]
    for w in short.warnings:
        if w.last_resort:
            out.append(paint("warn", f"  ! Last resort, destroys data: {w.what}"))
        else:
            out.append(paint("warn", f"  x Do not: {w.what}" + (f" ({w.why})" if w.why else "")))
    body = _evidence_lines(reply, EVIDENCE_ROWS)
    for table in reply.tables:
        body += [""] + table_lines(table)
    body += [series_line(s) for s in reply.series]
    for section in reply.sections:
        body += [""] + _section_lines(section, SECTION_LINES)
    if body:
        out += [""] + (body[1:] if body[0] == "" else body)
    if short.why is not None:
        w = short.why
        out += ["", f"Why: {w.label} {w.symbol}: {first_sentence(w.does, 120)}", f"     {w.url}"]
    elif short.why_note:
        out += ["", f"Why: {short.why_note}"]
    if short.others:
        out += ["", short.others_heading] + [f"  - {o}" for o in short.others]
    if reply.actions:
        out += ["", "Actions"] + [
            f"  {a.label}: /kafka {a.command}" + ("  (asks for confirmation)" if a.mutating else "")
            for a in reply.actions
        ]
    out += [f"Note: {n}" for n in reply.notes]
    if short.more:
        out.append("More: " + "  |  ".join(short.more))
    return out


def render_text(reply: Reply, *, full: bool = False, color: bool = False) -> str:
    """The terminal form: short by default; ``full`` gives the whole runbook form. ``color`` only
    when writing to a TTY."""
    reply = localize(reply, "terminal")
    if full:
        text = TEMPLATES.get_template("text.j2").render(reply=reply).rstrip() + "\n"
        extra: list[str] = []
        for table in reply.tables:
            extra += [""] + table_lines(table)
        extra += [series_line(s) for s in reply.series]
        return text + ("\n".join(extra).lstrip("\n") + "\n" if extra else "")
    lines = _short_text(reply, short_answer(reply), _Paint(color))
    return "\n".join(lines).rstrip() + "\n"


def addition_reply(early: Reply, final: Reply) -> Reply:
    """What the complete answer adds to an early one already shown (the metric lake's part)."""
    seen = {(e.label, e.value) for e in early.evidence}
    notes = [n for n in final.notes if n not in early.notes]
    verdict = "No further evidence from the metric lake."
    if final.diagnoses and early.diagnoses and final.diagnoses[0].entry_id != early.diagnoses[0].entry_id:
        verdict = f"The lake's trend changes the ranking: {final.diagnoses[0].title} first."
    elif final.verdict != early.verdict:
        verdict = f"Verdict now: {final.verdict}"
    elif any((e.label, e.value) not in seen for e in final.evidence):
        verdict = "The metric lake's evidence, added to the answer above."
    return Reply(
        title=f"Metric lake{f' ({final.window})' if final.window else ''}",
        severity=final.severity,
        verdict=verdict,
        evidence=[e for e in final.evidence if (e.label, e.value) not in seen],
        series=final.series,
        notes=notes,
        tables=[t for t in final.tables if t not in early.tables],
    )


def render_addition(add: Reply) -> str:
    """The lake's part (``addition_reply``) for a terminal that already printed the early answer."""
    out = [f"+ {add.title}: {add.verdict}"]
    out += [f"  {TEXT_MARK[e.status]} {e.label}: {e.value}  ({e.source})" for e in add.evidence]
    out += [f"  {series_line(s)}" for s in add.series]
    out += [f"  Note: {n}" for n in add.notes]
    return "\n".join(out) + "\n"


def render_json(reply: Reply, *, indent: int | None = 2) -> str:
    # JSON is read by scripts on the bot's side: the terminal's advice.
    return json.dumps(localize(reply, "terminal").to_dict(), indent=indent, ensure_ascii=False)


RENDERERS = {"text": render_text, "json": render_json}
