"""The loader validates the whole KB and names the file and field of anything malformed."""

import shutil
from pathlib import Path

import pytest
import yaml

from runbook_kb import KBError, default_kb, load_kb
from runbook_kb.loader import DATA_DIR


def test_packaged_kb_loads_and_links_resolve():
    kb = default_kb()
    assert len(kb.failure_modes) == 23
    for mode in kb.failure_modes.values():
        for ref in mode.mechanism:
            link = kb.ref_link(ref)
            assert link.startswith(f"https://github.com/apache/kafka/blob/{ref.commit or '04bfe7d'}/")
            assert link.endswith(f"#L{ref.lines[0]}")
    assert kb.ref_link(kb.failure_modes["broker-loss"].mechanism[0]) == (
        "https://github.com/apache/kafka/blob/04bfe7d/core/src/main/scala/kafka/cluster/Partition.scala#L232"
    )


@pytest.fixture
def kb_copy(tmp_path) -> Path:
    dst = tmp_path / "data"
    shutil.copytree(DATA_DIR, dst)
    return dst


def _edit(path: Path, change) -> None:
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))


def test_copy_loads(kb_copy):
    assert len(load_kb(kb_copy).failure_modes) == 23


@pytest.mark.parametrize(
    "change,field",
    [
        (lambda d: d.pop("cause"), "'cause'"),
        (lambda d: d.update(family="network"), "'family'"),
        (lambda d: d["levers"][0].update(limit_class="MEDIUM"), "'levers.0.limit_class'"),
        (lambda d: d["mechanism"][0].update(lines=[]), "'mechanism.0.lines'"),
        (lambda d: d["mechanism"][0].update(file="Nope.scala"), "'mechanism.0.file'"),
        (lambda d: d["symptoms"][0].update(colour="red"), "'symptoms.0.colour'"),
        (lambda d: d.update(related=["no-such-entry"]), "'related.0'"),
        (lambda d: d["look_alikes"][0].update(entry="no-such-entry"), "'look_alikes.0.entry'"),
        (lambda d: d["look_alikes"][0].update(entry="broker-loss"), "'look_alikes.0.entry'"),
        (lambda d: d["mitigation"][1].update(confirmed_only="sometimes"), "'mitigation.1.confirmed_only'"),
        (lambda d: d.update(id="Broker Loss"), "'id'"),
    ],
)
def test_malformed_entry_names_file_and_field(kb_copy, change, field):
    _edit(kb_copy / "failure_modes" / "broker-loss.yaml", change)
    with pytest.raises(KBError) as err:
        load_kb(kb_copy)
    assert "broker-loss.yaml" in str(err.value)
    assert field in str(err.value)


def test_duplicate_id_is_refused(kb_copy):
    shutil.copy(kb_copy / "failure_modes" / "broker-loss.yaml", kb_copy / "failure_modes" / "zz-copy.yaml")
    with pytest.raises(KBError, match="zz-copy.yaml: field 'id'"):
        load_kb(kb_copy)


def test_broken_yaml_and_missing_reference_are_named(kb_copy):
    (kb_copy / "reference" / "latency.yaml").unlink()
    with pytest.raises(KBError, match="reference/latency.yaml: missing"):
        load_kb(kb_copy)
    (kb_copy / "failure_modes" / "gc-pauses.yaml").write_text("id: [unclosed\n")
    with pytest.raises(KBError, match="gc-pauses.yaml: not valid YAML"):
        load_kb(kb_copy)


def test_reference_file_field_errors_are_named(kb_copy):
    _edit(kb_copy / "reference" / "configs.yaml", lambda d: d["configs"][0].update(scope="galaxy"))
    with pytest.raises(KBError, match=r"configs.yaml: field 'configs.0.scope'"):
        load_kb(kb_copy)


@pytest.mark.parametrize(
    "change,message",
    [
        (lambda d: d["causes"][0].update(entry="no-such-entry"), "field 'causes.0.entry': no entry with id"),
        (lambda d: d["causes"][0].update(count="replicas out of ISR"), "field 'causes.0.count'"),
        (lambda d: d["causes"][0].update(state="paused on {broker}"), "field 'causes.0.state'"),
        (lambda d: d["causes"].append(dict(d["causes"][0])), "field '\\(top level\\)'.*unique"),
    ],
)
def test_missing_replica_causes_are_checked(kb_copy, change, message):
    _edit(kb_copy / "reference" / "missing_replicas.yaml", change)
    with pytest.raises(KBError, match=f"missing_replicas.yaml: {message}"):
        load_kb(kb_copy)


def test_catalogue_must_list_every_entry(kb_copy):
    _edit(kb_copy / "meta.yaml", lambda d: d["catalogue"].remove("gc-pauses"))
    with pytest.raises(KBError, match="catalogue.*gc-pauses"):
        load_kb(kb_copy)


def test_vocabulary_targets_exist():
    kb = default_kb()
    from runbook_kb.lookup import Lookup

    lookup = Lookup(kb)
    dangling = [term for term in kb.vocabulary if not lookup.exact(term)]
    assert not dangling, f"vocabulary words that reach no entry: {dangling}"
