"""The metric lake on Delta Lake.

``schema`` (the tables' columns, the time rule; a leaf module), ``spark`` (the session, with the
Delta jars of ``jars``), ``collector`` -> ``ingest`` (landing files -> the samples table, exactly
once through Delta's idempotent writes) -> ``rollups`` (1-minute and 1-hour tables),
``maintenance`` (OPTIMIZE ZORDER of closed hours, retention, VACUUM), ``service`` (the warm
session and ``LakeService.query``, the one way into the lake), ``queries`` (what the commands
ask), ``errors`` (the lake's own errors), ``synthetic`` (generated lakes with incidents).
Nothing here imports from ``commands``."""
