"""Runs the C++ jinja_driver over a batch of JSON-line requests."""

import json
import os
import subprocess


def driver_path():
    path = os.environ.get("JINJA_DRIVER")
    if not path or not os.path.exists(path):
        raise RuntimeError("set JINJA_DRIVER to the jinja_driver executable (ctest does this)")
    return path


def run_driver(requests):
    """Sends the requests in one process; returns ("output", text) or ("error", message) each."""
    payload = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in requests)
    proc = subprocess.run([driver_path()], input=payload.encode("utf-8"), capture_output=True,
                          timeout=120, check=True)
    # Split on "\n" only: rendered text may hold U+2028 and other characters str.splitlines() splits on.
    lines = [line for line in proc.stdout.decode("utf-8").split("\n") if line]
    assert len(lines) == len(requests), proc.stderr.decode("utf-8", "replace")
    replies = []
    for line in lines:
        reply = json.loads(line)
        replies.append(("output", reply["output"]) if "output" in reply else ("error", reply["error"]))
    return replies
