"""Errors a command raises to end with a short answer instead of a result."""


class Unavailable(Exception):
    """An evidence source (cluster, lake) could not be reached; the message says what to do."""


class NothingToDo(Exception):
    """A change the cluster already reflects (every leader preferred, no throttle to clear, no open
    transaction): answered as OK, with no confirmation token, since there is nothing to confirm."""
