"""What the local cluster and its fault injector share, kept in a leaf module so the injector
(faults.py) needs nothing from cluster.py at run time and the two do not import each other."""

from __future__ import annotations

import logging


class ClusterError(RuntimeError):
    pass


def quiet_logger() -> logging.Logger:
    """librdkafka logs every refused connection while nodes start; route that
    to a logger that is silent unless the caller configures it."""
    lg = logging.getLogger("localkafka.rdkafka")
    lg.propagate = False
    if not lg.handlers:
        lg.addHandler(logging.NullHandler())
    return lg
