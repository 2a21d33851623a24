"""Runbook failure modes the lab cannot reproduce on one machine, each with the reason
(`kbot lab list` shows them, so nobody mistakes a gap for a pass)."""

from lab.mode import Mode

_SHARED_LOOPBACK = (
    "every node listens on the same loopback interface in one network namespace, so the lab "
    "cannot slow or cut one broker's connections without the same happening to the bot's "
    "own admin connections and to every broker's heartbeats"
)

METADATA_LAG = Mode(
    name="metadata-lag",
    feasible=False,
    summary="one broker applies KRaft metadata records late and routes clients to old leaders",
    expect_entry="metadata-lag",
    expect_severity="warning",
    questions=("why NOT_LEADER_OR_FOLLOWER",),
    note="needs one broker's metadata fetches from the controller delayed while its other traffic flows: "
    "they travel on that broker's own connection to the controller's port, from an ephemeral source port, "
    "so a filter by port (how lab/netcut.py cuts a broker's listener) cannot single it out; "
    + _SHARED_LOOPBACK
    + ", and this kernel offers tc no netem to delay rather than drop (a delay on the controller port would "
    "slow every broker's heartbeats and fence them all)",
)

MODES = [METADATA_LAG]
