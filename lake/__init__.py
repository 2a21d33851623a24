"""The metric lake on Delta Lake.

``schema`` (the tables' columns, the time rule; a leaf module), ``spark`` (the session, with the
Delta jars of ``jars``), ``collector`` (from the exporters, or ``prometheus_source``: from a
Prometheus) -> ``landing`` files -> ``ingest`` (the samples table, exactly once through Delta's
idempotent writes, as each file lands) -> ``rollups`` (1-minute and 1-hour tables),
``maintenance`` (OPTIMIZE ZORDER of closed hours, retention, VACUUM), ``connect`` (the warm Spark
Connect server `kbot run` keeps), ``service`` (the session and ``LakeService.query``, the one way
into the lake), ``queries`` (what the commands ask), ``errors`` (the lake's own errors). Generated
lakes with incidents, for tests and benchmarks, are in ``tools.synthetic``.
Nothing here imports from ``commands``."""
