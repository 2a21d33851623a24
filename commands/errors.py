"""Errors a command raises to end with a short answer instead of a result."""


class Unavailable(Exception):
    """An evidence source (cluster, lake) could not be reached; the message says what to do."""
