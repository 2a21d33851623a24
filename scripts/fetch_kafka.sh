#!/bin/sh
# Fetch the Kafka / log4j / JMX-exporter jars into the kbot cache
# ($KBOT_CACHE_DIR or ~/.cache/kbot) with Maven, e.g. to warm a CI image.
# Versions: localkafka/pom.xml. A complete cache is not fetched again.
set -eu
cd "$(dirname "$0")/.."
PY="${PYTHON:-.venv/bin/python}"
[ -x "$PY" ] || PY=python3
exec "$PY" -c 'import sys
from localkafka.fetch import JarsError, ensure_jars
try:
    print(ensure_jars())
except JarsError as e:
    sys.exit(f"error: {e}")'
