"""The runbook knowledge base: Kafka failure modes and reference knowledge as validated data."""

from runbook_kb.loader import KBError, KnowledgeBase, default_kb, load_kb

__all__ = ["KBError", "KnowledgeBase", "default_kb", "load_kb"]
