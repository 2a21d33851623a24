"""The failure lab: reproduce the runbook's failure modes on a real local cluster, ask the bot
as an engineer would, and judge its answer from the outside (``kbot lab list | run | heal``)."""
