"""The project's top-level packages, lowest layer first: what the import and settings tests scan."""

PACKAGES = (
    "kbot_settings",
    "runbook_kb",
    "live",
    "localkafka",
    "spark_queries",
    "lake",
    "window_queries",
    "framework",
    "diagnosis",
    "commands",
    "gate",
    "bot",
    "lab",
    "cli",
    "tools",
)
