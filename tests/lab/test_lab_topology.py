"""The cluster shapes the lab asks of localkafka (no JVM started): three controllers, per-role and
per-node settings, a second log dir for one broker."""

from lab.topology import FETCH_SESSION_SLOTS, quorum, standard


def _props(path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v  # a later key wins, as in java.util.Properties
    return out


def test_quorum_has_three_voters_on_distinct_ports(tmp_path):
    c = quorum(base_dir=tmp_path / "q", port_base=24090)
    ports = [p for n in c.nodes for p in (n.port, n.metrics_port)]
    assert len(ports) == len(set(ports)) and max(ports) < 32768
    assert sorted(c.controllers) == [1, 2, 3]
    assert c.voters == "1@127.0.0.1:24090,2@127.0.0.1:24094,3@127.0.0.1:24095"
    for n in c.nodes:
        c._render(n)
    for n in c.nodes:
        props = _props(n.props_file)
        assert props["controller.quorum.voters"] == c.voters
    assert _props(c.brokers[101].props_file)["auto.create.topics.enable"] == "false"


def test_standard_overrides_and_second_log_dir(tmp_path):
    c = standard(base_dir=tmp_path / "s", port_base=25090)
    for n in c.nodes:
        c._render(n)
    b101, b103 = _props(c.brokers[101].props_file), _props(c.brokers[103].props_file)
    assert b101["max.incremental.fetch.session.cache.slots"] == str(FETCH_SESSION_SLOTS)
    assert "max.incremental.fetch.session.cache.slots" not in b103
    assert b103["log.dirs"].split(",") == [str(c.brokers[103].dir / "data"), str(c.disk2)]
    assert c.disk2.parent == c.disk2_mount  # a folder on the small filesystem, not its root
    assert _props(c.controller.props_file)["auto.leader.rebalance.enable"] == "false"
