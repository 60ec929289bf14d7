"""Starts `nanovllm serve` on a free port for a test and stops it; runs `nanovllm generate` for
the outputs a server's answers must equal. The binary comes from NANOVLLM_BIN."""
import json
import os
import re
import signal
import subprocess
import threading

BIN = os.environ["NANOVLLM_BIN"]
DATA = os.path.join(os.path.dirname(__file__), "..", "data")
TIED = os.path.join(DATA, "models", "qwen3-tiny-tied")
UNTIED = os.path.join(DATA, "models", "qwen3-tiny-untied")
MODEL_NAME = "qwen3-tiny"


class Server:
    def __init__(self, *args, model=TIED, **popen):
        self.proc = subprocess.Popen(
            [BIN, "serve", "--model", model, "--port", "0", "--served-model-name", MODEL_NAME,
             "--device", "cpu", *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
        self.stderr_lines = []
        threading.Thread(target=self._collect_stderr, daemon=True).start()
        line = self.proc.stdout.readline()
        match = re.search(r"on (http://[\d.]+:\d+)", line)
        if not match:
            self.proc.kill()
            raise RuntimeError(f"the server did not start: {line!r} {''.join(self.stderr_lines)}")
        self.url = match.group(1)
        self.pid = self.proc.pid

    def _collect_stderr(self):
        for line in self.proc.stderr:
            self.stderr_lines.append(line)

    def status(self):
        """The server's /proc status fields (VmHWM, Threads, ...)."""
        with open(f"/proc/{self.pid}/status") as f:
            return dict(line.split(":", 1) for line in f if ":" in line)

    def threads(self):
        return int(self.status()["Threads"])

    def peak_rss_mib(self):
        return int(self.status()["VmHWM"].split()[0]) / 1024

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def generate(requests, model=TIED):
    """`nanovllm generate` over JSON-lines requests; the output rows in input order."""
    lines = "".join(json.dumps(r) + "\n" for r in requests)
    proc = subprocess.run([BIN, "generate", "--model", model, "--device", "cpu", "--no-progress"],
                          input=lines, capture_output=True, text=True, timeout=300)
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.strip()]
    assert len(rows) == len(requests), proc.stderr
    return rows


METRIC_LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{([^}]*)\})? (\S+)$')


def parse_metrics(text):
    """{(name, labels without model_name): value} from the Prometheus text format."""
    values = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        match = METRIC_LINE.match(line)
        assert match, f"not a metric line: {line!r}"
        name, labels, value = match.groups()
        labels = ",".join(l for l in (labels or "").split(",") if l and not l.startswith("model_name="))
        values[(name, labels)] = float(value)
    return values
