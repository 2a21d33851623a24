"""A process that has used Spark Connect (gRPC) can still start child processes: the in-process
Spark fallback and the collector are launched with Popen after a Connect server failed. With
grpcio's fork handlers on, some children died before exec (grpc/grpc#43055): 4-9 of these 1,000
without lake.spark's setting, none with it."""

import subprocess
import sys

CHILD = r"""
import subprocess, threading
import lake.spark  # the bot's Spark module, imported before any Connect session, as in the bot
import grpc

stop = threading.Event()

def dial():  # a Connect client that keeps dialling a server that is not there
    while not stop.is_set():
        channel = grpc.insecure_channel("127.0.0.1:1")
        try:
            grpc.channel_ready_future(channel).result(timeout=0.05)
        except grpc.FutureTimeoutError:
            pass
        channel.close()

dialling = threading.Thread(target=dial, daemon=True)
dialling.start()
died = sum(subprocess.Popen(["true"], preexec_fn=lambda: None).wait() != 0 for _ in range(1000))
stop.set()
dialling.join()
print(died)
"""


def test_children_start_while_a_grpc_client_is_active():
    res = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.strip() == "0", f"{res.stdout.strip()} of 1,000 children died before exec"
