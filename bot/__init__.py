"""The Kafka incident bot: Slack app, terminal interface and renderers."""
