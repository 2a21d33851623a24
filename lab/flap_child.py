"""Child process for the flapping-broker mode (run as a script, not imported).

A duty cycle on one broker's process, from outside it: SIGSTOP, wait ``--stop-s``, SIGCONT, wait
``--run-s``, again, until this process is told to stop (SIGTERM / SIGINT) or the broker is gone.
It always leaves the broker running (SIGCONT) when it ends. A separate process, so the fault
outlives `kbot lab run` (which leaves it in place for the engineer to ask more) until `kbot lab
heal` ends it by its pid.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import threading


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--pid", type=int, required=True)
    ap.add_argument("--stop-s", type=float, required=True)
    ap.add_argument("--run-s", type=float, required=True)
    a = ap.parse_args()
    done = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: done.set())
    print("READY", flush=True)
    try:
        while not done.is_set():
            os.kill(a.pid, signal.SIGSTOP)
            done.wait(a.stop_s)
            os.kill(a.pid, signal.SIGCONT)
            done.wait(a.run_s)
    except ProcessLookupError:
        return 0  # the broker is gone (killed, restarted): nothing left to pause
    finally:
        try:
            os.kill(a.pid, signal.SIGCONT)
        except ProcessLookupError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
