# The Kafka incident bot as a container: the Slack app (`kbot serve`) with the JRE Spark needs for
# the metric lake. It talks to an existing Kafka cluster; the local demo cluster (`kbot cluster up`)
# is for a workstation, not for this image.
#
#   docker build -t kafka-incident-bot .
#   docker run --rm -p 3000:3000 \
#     -e SLACK_BOT_TOKEN -e SLACK_SIGNING_SECRET \
#     -e KBOT_BOOTSTRAP=broker-1:9092,broker-2:9092 \
#     -v kbot-state:/var/lib/kbot kafka-incident-bot
FROM python:3.11-slim-bookworm

# Java for Spark (the lake's queries); procps for pyspark's launcher scripts.
RUN apt-get update -qq \
    && apt-get install -y -qq --no-install-recommends openjdk-17-jre-headless procps \
    && rm -rf /var/lib/apt/lists/*

RUN useradd --system --create-home --home-dir /home/kbot kbot \
    && install -d -o kbot -g kbot -m 0700 /var/lib/kbot

WORKDIR /app
COPY pyproject.toml README.md ./
COPY kbot_settings ./kbot_settings
COPY gate ./gate
COPY bot ./bot
COPY framework ./framework
COPY diagnosis ./diagnosis
COPY commands ./commands
COPY runbook_kb ./runbook_kb
COPY live ./live
COPY lake ./lake
COPY spark_queries ./spark_queries
COPY window_queries ./window_queries
COPY localkafka ./localkafka
COPY lab ./lab
COPY cli ./cli
RUN python -m venv /app/.venv \
    && /app/.venv/bin/pip install --no-cache-dir -q --upgrade pip \
    && /app/.venv/bin/pip install --no-cache-dir -q .

USER kbot
# State (audit log, pending actions, the lake) lives in a volume, private to the bot's user.
ENV KBOT_HOME=/var/lib/kbot \
    KBOT_PORT=3000 \
    PATH=/app/.venv/bin:$PATH \
    PYTHONUNBUFFERED=1
VOLUME ["/var/lib/kbot"]
EXPOSE 3000
HEALTHCHECK --interval=30s --timeout=5s --start-period=30s CMD python -c "import urllib.request,sys; sys.exit(0 if urllib.request.urlopen('http://127.0.0.1:3000/healthz', timeout=4).status == 200 else 1)"
CMD ["kbot", "serve"]
