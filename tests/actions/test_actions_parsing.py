"""Pure parsing and bounds of the mutating commands' arguments: rates, retention, partition lists."""

import pytest

from commands.elect_leaders import MAX_PARTITIONS, parse_partitions
from commands.registry import ROUTER
from commands.retention import MAX_MS, MIN_MS, lowers, parse_retention_ms
from commands.throttle import MAX_RATE, parse_rate
from framework.router import BadInput


@pytest.mark.parametrize(
    "text,rate",
    [
        ("10485760", 10_485_760),
        ("50MB/s", 50_000_000),
        ("50MBps", 50_000_000),
        ("10MiB/s", 10 * 1024 * 1024),
        ("1.5GB/s", 1_500_000_000),
        ("500kB", 500_000),
        ("100KiB/s", 102_400),
        ("10GB/s", MAX_RATE),
    ],
)
def test_rates(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize(
    "text,says",
    [
        ("0", "above 0"),
        ("0.4", "above 0"),
        ("10.1GB/s", "above 10 GB/s"),
        ("50Mb/s", "bits"),  # network units: a factor of 8 is not a rounding error
        ("fast", "not a rate"),
        ("1e9", "not a rate"),
        ("-5MB/s", "not a rate"),
        ("50 TB/s", "not a rate"),
    ],
)
def test_bad_rates(text, says):
    with pytest.raises(BadInput, match=says):
        parse_rate(text)


@pytest.mark.parametrize(
    "text,ms",
    [
        ("604800000", 604_800_000),
        ("-1", -1),
        ("7d", 7 * 86_400_000),
        ("12h", 12 * 3_600_000),
        ("90m", 90 * 60_000),
        ("60000", MIN_MS),
        ("1w", 604_800_000),
        (str(MAX_MS), MAX_MS),
    ],
)
def test_retention_values(text, ms):
    assert parse_retention_ms(text) == ms


@pytest.mark.parametrize(
    "text,says",
    [
        ("59999", "under a minute"),
        ("30s", "under a minute"),
        ("0", "under a minute"),
        (str(MAX_MS + 1), "more than 10 years"),
        ("3651d", "more than 10 years"),
        ("-2", "not a retention"),
        ("7 days", "not a retention"),
    ],
)
def test_bad_retention(text, says):
    with pytest.raises(BadInput, match=says):
        parse_retention_ms(text)


def test_lowering_treats_minus_one_as_forever():
    assert lowers(-1, 86_400_000)
    assert not lowers(86_400_000, -1)
    assert lowers(604_800_000, 86_400_000)
    assert not lowers(86_400_000, 604_800_000)
    assert not lowers(-1, -1)


@pytest.mark.parametrize(
    "text,parts",
    [
        ("0", [0]),
        ("0,2,5-7", [0, 2, 5, 6, 7]),
        ("3,1,1,2-3", [1, 2, 3]),
        (" 4 , 0 ", [0, 4]),
    ],
)
def test_partition_lists(text, parts):
    assert parse_partitions(text) == parts


@pytest.mark.parametrize(
    "text,says",
    [
        ("", "not a partition list"),
        ("1,,2", "not a partition list"),
        ("a", "not a partition list"),
        ("7-5", "backwards"),
        ("1-2-3", "not a partition list"),
        (f"0-{MAX_PARTITIONS}", "more than"),
    ],
)
def test_bad_partition_lists(text, says):
    with pytest.raises(BadInput, match=says):
        parse_partitions(text)


@pytest.mark.parametrize(
    "text,name,args,options",
    [
        ("abort-txn payments 0", "abort-txn", {"topic": "payments", "partition": 0}, {}),
        (
            "abort-txn payments 3 --producer-id 4001",
            "abort-txn",
            {"topic": "payments", "partition": 3},
            {"producer-id": 4001},
        ),
        ("elect-leaders orders", "elect-leaders", {"topic": "orders"}, {}),
        ("elect-leaders orders 0,2,5-7", "elect-leaders", {"topic": "orders", "partitions": "0,2,5-7"}, {}),
        ("throttle set 50MB/s", "throttle set", {"rate": "50MB/s"}, {}),
        ("THROTTLE CLEAR", "throttle clear", {}, {}),
        ("retention orders -1", "retention", {"topic": "orders", "ms": "-1"}, {}),
        ("triage", "triage", {}, {}),
        ("triage under min isr", "triage", {"symptom": "under min isr"}, {}),
        (
            "triage answer 0123456789ab q2 yes",
            "triage answer",
            {"token": "0123456789ab", "question": "q2", "choice": "yes"},
            {},
        ),
        ("digest --groups a,b", "digest", {}, {"groups": "a,b"}),
    ],
)
def test_router_grammar(text, name, args, options):
    req = ROUTER.parse(text)
    assert (req.spec.name, req.args, req.options) == (name, args, options)


@pytest.mark.parametrize(
    "text",
    ["abort-txn 'bad topic' 0", "abort-txn payments one", "elect-leaders ../x", "retention orders", "throttle set"],
)
def test_router_refuses(text):
    with pytest.raises(BadInput):
        ROUTER.parse(text)


def test_mutating_commands_are_registered_with_actions():
    for name in ("abort-txn", "elect-leaders", "throttle set", "throttle clear", "retention"):
        cmd = ROUTER.find(name)
        assert cmd is not None and cmd.spec.mutating and cmd.action is not None and cmd.run is None
    for name in ("triage", "triage answer", "digest"):
        cmd = ROUTER.find(name)
        assert cmd is not None and not cmd.spec.mutating and cmd.run is not None
