"""Load and validate the whole knowledge base.

Validation happens at start-up and in a test: a malformed data file stops the bot with a
message naming the file and the field, never a half-loaded KB.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import yaml
from pydantic import ValidationError

from runbook_kb import cache
from runbook_kb.schema import (
    REFERENCE_FILES,
    Configs,
    Durability,
    FailureMode,
    Latency,
    MissingReplicas,
    PartitionCategories,
    ReferenceTopic,
    ReferenceTopics,
    Signals,
    SourceRef,
    Strict,
    parse_source_loc,
)

if TYPE_CHECKING:  # the lookup imports this module; the name is for an annotation only
    from runbook_kb.lookup import Lookup

M = TypeVar("M", bound=Strict)

DATA_DIR = Path(__file__).parent / "data"


class KBError(Exception):
    """The knowledge base is malformed; the message names the file and the field."""


@dataclass(frozen=True)
class KnowledgeBase:
    meta: dict[str, Any]  # meta.yaml as read (source_repo, source_commit, catalogue ...)
    source_paths: dict[str, str]
    failure_modes: dict[str, FailureMode]
    reference: dict[str, Strict] = field(default_factory=dict)
    vocabulary: dict[str, str] = field(default_factory=dict)

    @property
    def topics(self) -> dict[str, ReferenceTopic]:
        """Answerable reference topics by id (reference/topics.yaml)."""
        holder = self.reference.get("topics")
        return {t.id: t for t in holder.topics} if isinstance(holder, ReferenceTopics) else {}

    @property
    def catalogue(self) -> list[str]:
        """Failure-mode ids in the runbook's order."""
        return list(self.meta["catalogue"])

    def link(self, file: str, line: int | None = None, commit: str | None = None) -> str:
        """A link to the cited file at the commit the runbook was written against (or ``commit``)."""
        url = f"{self.meta['source_repo']}/blob/{commit or self.meta['source_commit']}/{self.source_paths[file]}"
        return f"{url}#L{line}" if line else url

    def ref_link(self, ref: SourceRef) -> str:
        return self.link(ref.file, ref.lines[0], ref.commit)

    def loc_link(self, loc: str) -> str:
        file, line = parse_source_loc(loc)
        return self.link(file, line)


# libyaml's C loader reads the runbook ~10x faster than the pure-Python one: it is most of a
# one-shot `kbot ask`'s start-up. Same safe subset of YAML either way.
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _read_yaml(path: Path) -> object:
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_LOADER)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise KBError(f"{path.name}: not valid YAML: {exc}") from None


def _validate(path: Path, model: type[M]) -> M:
    raw = _read_yaml(path)
    if not isinstance(raw, dict):
        raise KBError(f"{path.name}: expected a mapping at the top level")
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "(top level)"
        more = f" (and {exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        raise KBError(f"{path.name}: field '{where}': {first['msg']}{more}") from None


def _read_source_paths(path: Path) -> dict[str, str]:
    with path.open(encoding="utf-8") as fh:
        return {row["file"]: row["repo_path"] for row in csv.DictReader(fh, delimiter="\t")}


def _check_sources(name: str, mode: FailureMode, paths: dict[str, str]) -> None:
    for i, ref in enumerate(mode.mechanism):
        if ref.file not in paths:
            raise KBError(f"{name}: field 'mechanism.{i}.file': {ref.file!r} is not in kafka-source-paths.tsv")
    for i, lever in enumerate(mode.levers):
        if lever.source and parse_source_loc(lever.source)[0] not in paths:
            raise KBError(
                f"{name}: field 'levers.{i}.source': {lever.source!r} names a file not in kafka-source-paths.tsv"
            )


def table_rows(model: Strict) -> list[str] | None:
    """The row names of a reference file's table, or None when the file has no table.

    Config keys, metric names (metrics and alerts), latency components, durability rows
    ("acks=all min.insync.replicas=2 RF=3") and partition categories.
    """
    if isinstance(model, Configs):
        return [c.key for c in model.configs]
    if isinstance(model, Signals):
        return [m.name for m in model.metrics] + [a.metric for a in model.alerts]
    if isinstance(model, Latency):
        return [c.metric for c in model.components]
    if isinstance(model, Durability):
        return [
            f"acks={r.acks} min.insync.replicas={r.min_insync_replicas} RF={r.replication_factor}" for r in model.matrix
        ]
    if isinstance(model, PartitionCategories):
        return [c.name for c in model.categories]
    return None


def _check_topics(reference: dict[str, Strict], modes: dict[str, FailureMode]) -> None:
    """Every topic points at real facts and tables, and every reference fact is reachable from a topic."""
    holder = reference.get("topics")
    if not isinstance(holder, ReferenceTopics):
        return
    # the latency map's parts name the failure modes they point at
    latency = reference.get("latency")
    for i, comp in enumerate(latency.components if isinstance(latency, Latency) else []):
        for j, eid in enumerate(comp.entries):
            if eid not in modes:
                raise KBError(f"latency.yaml: field 'components.{i}.entries.{j}': no failure mode with id {eid!r}")
    seen: set[str] = set()
    shown_facts: set[tuple[str, str]] = set()
    shown_tables: set[str] = set()
    for i, topic in enumerate(holder.topics):
        where = f"topics.yaml: field 'topics.{i}"
        if topic.id in seen or topic.id in modes:
            raise KBError(f"{where}.id': {topic.id!r} is already used by another entry")
        seen.add(topic.id)
        for j, rel in enumerate(topic.related):
            if rel not in modes:
                raise KBError(f"{where}.related.{j}': no failure mode with id {rel!r}")
        for j, src in enumerate(topic.sources):
            model = reference.get(src.file)
            if model is None or src.file == "topics":
                raise KBError(f"{where}.sources.{j}.file': no reference file {src.file!r}")
            names = {f.topic for f in getattr(model, "facts", [])}
            for k, fact_topic in enumerate(src.facts):
                if fact_topic not in names:
                    raise KBError(f"{where}.sources.{j}.facts.{k}': {src.file}.yaml has no facts on {fact_topic!r}")
                shown_facts.add((src.file, fact_topic))
            rows = table_rows(model)
            if (src.table or src.rows) and rows is None:
                raise KBError(f"{where}.sources.{j}.table': {src.file}.yaml has no table")
            for k, row in enumerate(src.rows):
                if rows is None or row not in rows:  # (None was refused just above)
                    raise KBError(f"{where}.sources.{j}.rows.{k}': {src.file}.yaml has no row {row!r}")
            if src.table and not src.rows:
                shown_tables.add(src.file)
    for name, model in reference.items():
        if name == "topics":
            continue
        for fact in getattr(model, "facts", []):
            if (name, fact.topic) not in shown_facts:
                raise KBError(f"topics.yaml: no topic shows the facts on {fact.topic!r} of {name}.yaml")
        if table_rows(model) is not None and name not in shown_tables:
            raise KBError(f"topics.yaml: no topic shows the whole table of {name}.yaml")


def load_kb(data_dir: Path = DATA_DIR) -> KnowledgeBase:
    meta = _read_yaml(data_dir / "meta.yaml")
    if not isinstance(meta, dict) or not {"source_repo", "source_commit"} <= meta.keys():
        raise KBError("meta.yaml: fields 'source_repo' and 'source_commit' are required")
    paths = _read_source_paths(data_dir / "kafka-source-paths.tsv")

    modes: dict[str, FailureMode] = {}
    file_of: dict[str, str] = {}
    files = sorted((data_dir / "failure_modes").glob("*.yaml"))
    if not files:
        raise KBError(f"{data_dir / 'failure_modes'}: no failure-mode files found")
    for path in files:
        mode = _validate(path, FailureMode)
        if mode.id in modes:
            raise KBError(f"{path.name}: field 'id': {mode.id!r} is already used by another entry")
        _check_sources(path.name, mode, paths)
        modes[mode.id] = mode
        file_of[mode.id] = path.name

    for mode in modes.values():
        for i, rel in enumerate(mode.related):
            if rel not in modes:
                raise KBError(f"{file_of[mode.id]}: field 'related.{i}': no entry with id {rel!r}")
        for i, alike in enumerate(mode.look_alikes):
            if alike.entry not in modes or alike.entry == mode.id:
                raise KBError(
                    f"{file_of[mode.id]}: field 'look_alikes.{i}.entry': no other entry with id {alike.entry!r}"
                )

    reference: dict[str, Strict] = {}
    for fname, model in REFERENCE_FILES.items():
        path = data_dir / "reference" / fname
        if not path.exists():
            raise KBError(f"reference/{fname}: missing")
        reference[fname.removesuffix(".yaml")] = _validate(path, model)
    signals = reference.get("signals")
    if isinstance(signals, Signals):
        for i, alert in enumerate(signals.alerts):
            for rid in alert.runbook:
                if rid not in modes:
                    raise KBError(f"signals.yaml: field 'alerts.{i}.runbook': no entry with id {rid!r}")
    missing = reference.get("missing_replicas")
    if isinstance(missing, MissingReplicas):
        for i, cause in enumerate(missing.causes):
            if cause.entry is not None and cause.entry not in modes:
                raise KBError(f"missing_replicas.yaml: field 'causes.{i}.entry': no entry with id {cause.entry!r}")
    configs = reference.get("configs")
    if isinstance(configs, Configs):
        for i, cfg in enumerate(configs.configs):
            if cfg.source and parse_source_loc(cfg.source)[0] not in paths:
                raise KBError(f"configs.yaml: field 'configs.{i}.source': file not in kafka-source-paths.tsv")

    _check_topics(reference, modes)

    catalogue = meta.get("catalogue") or []
    if sorted(catalogue) != sorted(modes):
        raise KBError(
            "meta.yaml: field 'catalogue': must list every failure-mode id once; "
            f"missing {sorted(set(modes) - set(catalogue))}, unknown {sorted(set(catalogue) - set(modes))}"
        )
    vocab = _read_yaml(data_dir / "vocabulary.yaml")
    if not isinstance(vocab, dict) or not isinstance(vocab.get("terms"), dict):
        raise KBError("vocabulary.yaml: field 'terms': expected a mapping of words to metric, error or entry id")

    return KnowledgeBase(
        meta=meta,
        source_paths=paths,
        failure_modes=modes,
        reference=reference,
        vocabulary={str(k): str(v) for k, v in vocab["terms"].items()},
    )


# The packaged knowledge base when this process parsed it itself: its lookup, once built, is
# cached for the next process (runbook_kb/cache.py).
fresh_default: KnowledgeBase | None = None
# Lookups an earlier process built, by id of the KnowledgeBase they belong to: Lookup.for_kb takes
# them from here (the loader does not import the lookup, which imports the loader).
prebuilt_lookups: dict[int, Lookup] = {}


@lru_cache(maxsize=1)
def default_kb() -> KnowledgeBase:
    """The packaged knowledge base, loaded and validated once per process (or, when neither the data
    nor the code changed since, taken with its built lookup from the cache an earlier process left)."""
    global fresh_default

    built = cache.load(DATA_DIR)
    if built is not None:
        kb, lookup = built
        prebuilt_lookups[id(kb)] = lookup
        return kb
    fresh_default = load_kb()
    return fresh_default
