"""Subcommands of /kafka: one module each, listed in commands/registry.py, returning a Reply."""
