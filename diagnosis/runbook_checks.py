"""The live checks by the name the runbook binds them under (an entry's `checks.live`).

The runbook says which check gathers an entry's evidence; this module holds the functions, from
diagnosis/urp_checks.py, offline_checks.py, quorum_checks.py and txn_checks.py (metadata, the
quorum, transactions), diagnosis/metric_checks.py (the brokers' JMX exporters), quota_checks.py,
group_checks.py and reassignment_findings.py (causes beyond the runbook's 18). tests/kb/test_kb_bindings.py keeps the two in step.
"""

from __future__ import annotations

from diagnosis import (
    cold_reads,
    group_checks,
    metric_checks,
    produce_latency,
    quota_checks,
    reassignment_findings,
    responsiveness,
)
from diagnosis.live_common import Check
from diagnosis.offline_checks import check_offline, check_under_min_isr
from diagnosis.quorum_checks import check_controller, check_metadata_lag
from diagnosis.txn_checks import check_fencing, check_hanging
from diagnosis.urp_checks import check_urp
from runbook_kb import KnowledgeBase

# The live checks by the name the runbook binds them under (an entry's `checks.live`).
LIVE_CHECKS: dict[str, Check] = {
    "urp": check_urp,
    "offline": check_offline,
    "unclean": metric_checks.check_unclean,
    "under_min_isr": check_under_min_isr,
    "hanging": check_hanging,
    "controller": check_controller,
    "handler_saturation": metric_checks.check_handler_saturation,
    "fetch_sessions": metric_checks.check_fetch_sessions,
    "hot_partition": metric_checks.check_hot_partition,
    "disks": metric_checks.check_disks,
    "cold_reads": cold_reads.check_cold_reads,
    "metadata_lag": check_metadata_lag,
    "fencing": check_fencing,
    "latency": produce_latency.check_produce_latency,
    "starved_broker": responsiveness.check_starved_broker,
    "client_quotas": quota_checks.check_client_quotas,
    "group_lag": group_checks.check_group_lag,
    "reassignments": reassignment_findings.check_reassignments,
}


def check_for(kb: KnowledgeBase, entry_id: str) -> Check | None:
    """The live check the runbook binds to ``entry_id``, a failure mode or a reference topic (None
    when it names none)."""
    entry = kb.failure_modes.get(entry_id)
    topic = kb.topics.get(entry_id)
    name = entry.checks.live if entry is not None else topic.live if topic is not None else None
    return LIVE_CHECKS[name] if name else None
