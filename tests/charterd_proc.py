"""A real charterd for the Python suites (tests/python, tests/grpc).

charterd is started with --http 127.0.0.1:0 and says in its log which port the system gave it;
no port is picked here and handed over, so no other process can take it in between.
"""
import os
import re
import shutil
import subprocess
import tempfile
import time
import urllib.request

SERVING_HTTP = re.compile(r"serving HTTP/JSON and gRPC on https?://([^/\s\",]+)")


def redis_cli_args(url):
    """redis-cli's arguments for a unix:///path or tcp://host:port (redis://) URL."""
    if url.startswith("unix://"):
        return ["-s", url[len("unix://"):]]
    m = re.match(r"^(?:tcp|redis)://([^:/]+):(\d+)", url)
    return ["-h", m.group(1), "-p", m.group(2)] if m else []


class Charterd:
    """A charterd serving graph with --http on a port the system picks, stopped by stop().

    args are its other options; env its environment. hostport, port and base say where it
    serves once the constructor returns (it has answered /healthz there)."""

    def __init__(self, prefix, graph, args, env, scheme="http", cafile=None, data_dir=None):
        self.dir = data_dir or tempfile.mkdtemp(prefix=prefix)
        self.graph = graph
        self.redis = os.environ.get("CHARTER_TEST_REDIS")
        self.log_path = os.path.join(self.dir, "charterd.log")
        cmd = [os.environ["CHARTERD"], "--graph", graph, "--http", "127.0.0.1:0", *args]
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=log)
        self.hostport = None
        deadline = time.monotonic() + 20
        while self.proc.poll() is None and time.monotonic() < deadline:
            if self._listening(scheme, cafile):
                return
            time.sleep(0.1)
        log = self.log()
        self.stop()
        raise RuntimeError(f"charterd did not start:\n{log}")

    def _listening(self, scheme, cafile):
        if self.hostport is None:
            m = SERVING_HTTP.search(self.log())
            if m is None:
                return False
            self.hostport = m.group(1)
            self.port = int(self.hostport.rsplit(":", 1)[1])
            self.base = f"{scheme}://{self.hostport}"
        import ssl
        ctx = ssl.create_default_context(cafile=cafile) if cafile else None
        try:
            with urllib.request.urlopen(f"{self.base}/healthz", timeout=2, context=ctx) as r:
                return r.status == 200
        except OSError:
            return False

    def log(self):
        with open(self.log_path, encoding="utf-8", errors="replace") as f:
            return f.read()

    def stop(self):
        """Stops charterd, drops its graph's keys from the test Redis and its folder."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if self.redis:
            cli = ["redis-cli", *redis_cli_args(self.redis)]
            keys = subprocess.run(cli + ["--scan", "--pattern", f"*{{{self.graph}}}*"],
                                  capture_output=True, text=True, check=True).stdout.split()
            for i in range(0, len(keys), 500):
                subprocess.run(cli + ["DEL", *keys[i:i + 500]], capture_output=True, check=True)
        shutil.rmtree(self.dir, ignore_errors=True)
