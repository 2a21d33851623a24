"""Pure Spark queries over the metric lake (schema: ``lake.schema``).

Every public function takes lake DataFrames (plus plain Python parameters) and
returns a DataFrame.  None of them reads or writes anything, creates a
SparkSession or builds SQL text: values that may come from a chat user (topic,
group and metric names, time bounds) only ever enter a plan as literals via
``F.lit``/``isin``/Column comparisons.  So they work the same on a classic
session and on Spark Connect.

The incident window's questions of ``why`` (URP, under min ISR, offline partitions, hanging
transactions, handler saturation, the active controller), hot partitions and ``lag <group>``
(Burrow's verdict) are answered in process by DuckDB (``window_queries``), not here: a question
has one engine.

Modules, one per theme:

* ``window``       incident_window: time filter that also prunes Hive partitions
* ``history``      metric_history
* ``rollup``       minute_rollup, coarser_rollup (the rollup tables), rollup_history, with_seconds, newest_samples
"""
