#!/bin/sh
# Fetch the Delta Lake jars (delta-spark_2.13, delta-storage; version: lake/pom.xml) into the kbot
# cache ($KBOT_CACHE_DIR or ~/.cache/kbot) with Maven, so no SparkSession waits on Maven.
# A complete cache is not fetched again.
set -eu
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
exec "$PY" -m lake.jars
