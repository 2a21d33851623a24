"""`kbot run`'s start-up parts (cli/startup.py): what is still starting, with its age."""

from cli.startup import FAILED, STARTING, UP, Startup


def test_starting_names_only_the_parts_still_starting_with_their_age():
    now = [100.0]
    said: list[str] = []
    startup = Startup(said.append, clock=lambda: now[0])
    startup.set("cluster", STARTING, "starting the local one")
    startup.set("Spark", STARTING, "starting the lake's Spark server")
    now[0] = 112.4
    startup.set("Spark", FAILED, "the Spark server did not start")
    assert startup.starting() == ["cluster (12s)"]
    assert startup.line() == "cluster: starting (12s) | Spark: failed"
    startup.set("cluster", UP, "local cluster serving")
    assert startup.starting() == []
    assert said == [
        "cluster: starting the local one",
        "Spark: starting the lake's Spark server",
        "Spark: the Spark server did not start",
        "cluster: local cluster serving",
    ]
