"""The confirmation gate: nothing changes a cluster until the right person confirms, once.

A domain package, not a transport one: the terminal and the Slack app both hand the same gate to
the commands through their context (framework.actions.Gate is the interface the commands see).

    confirmation  tokens, expiry, who may confirm, second approvers, single-use execution
    rbac          the policy that says who may run and approve what, where
    audit         the append-only audit trail (and its optional Kafka mirror)
    state_db      the sqlite file the gate's records and the triage threads share
    files         0700 folders and 0600 files for all of the above
"""
