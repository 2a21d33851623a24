"""The metric lake: schema (``lake.schema``), session builder (``lake.spark``)
and a synthetic data generator (``lake.synthetic``)."""
