"""serve.py behind `gpugeek gateway` with real clients: urllib for REST, python3-websockets for WebSocket.

Checks, through the gateway: an exact 50/50 split over 200 REST calls and header stickiness; a WebSocket echo of 50
messages (up to 100 KiB) byte for byte and a token stream; the Prometheus counters (requests and tokens by version);
and a replica SIGKILLed under load losing no idempotent request.
"""

import asyncio
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request

import websockets

HERE = os.path.dirname(os.path.abspath(__file__))
GPT = os.path.dirname(HERE)
BINARY = os.environ.get("GPUGEEK_BINARY", os.path.join(GPT, "..", "..", "build", "gpugeek"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"{url} did not answer within {timeout} s")


def request(port, path, body=None, headers=None, host="gpt"):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data,
                                 headers={"Host": host, "Content-Type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.status, dict(r.headers), json.loads(r.read())


class ServeThroughGateway(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.procs = []
        cls.tmp = tempfile.mkdtemp(prefix="gpugeek-serve-")
        cls.ports = {name: free_port() for name in ("v1", "v2", "ha1", "ha2")}
        for name, port in cls.ports.items():
            version = "v2" if name == "v2" else "v1"
            cls.procs.append(subprocess.Popen(
                ["/usr/bin/python3", os.path.join(GPT, "serve.py"), "--port", str(port), "--version", version]))
        routes = os.path.join(cls.tmp, "routes.yaml")
        with open(routes, "w") as f:
            f.write(f"""routes:
  - service: gpt
    sticky: {{header: X-User}}
    versions:
      - {{name: v1, weight: 50, replicas: [{{id: v1-0, address: 127.0.0.1:{cls.ports['v1']}}}]}}
      - {{name: v2, weight: 50, replicas: [{{id: v2-0, address: 127.0.0.1:{cls.ports['v2']}}}]}}
  - service: gpt-ha
    hosts: [gpt-ha]
    versions:
      - name: v1
        weight: 100
        replicas:
          - {{id: ha-1, address: 127.0.0.1:{cls.ports['ha1']}}}
          - {{id: ha-2, address: 127.0.0.1:{cls.ports['ha2']}}}
""")
        cls.metrics_port = free_port()
        cls.gateway = subprocess.Popen(
            [BINARY, "gateway", "--routes", routes, "--listen", "127.0.0.1:0",
             "--metrics-listen", f"127.0.0.1:{cls.metrics_port}"],
            stdout=subprocess.PIPE, text=True)
        cls.procs.append(cls.gateway)
        cls.port = None
        deadline = time.monotonic() + 30
        while cls.port is None and time.monotonic() < deadline:
            line = cls.gateway.stdout.readline()
            m = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
            if m:
                cls.port = int(m.group(1))
        assert cls.port, "the gateway did not say where it listens"
        for port in cls.ports.values():
            wait_http(f"http://127.0.0.1:{port}/health")

    @classmethod
    def tearDownClass(cls):
        for p in cls.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in cls.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()

    def test_1_rest_split_and_stickiness(self):
        versions = {"v1": 0, "v2": 0}
        tokens = 0
        for _ in range(200):
            status, headers, body = request(self.port, "/predict", {"prompt": "Licence", "max_tokens": 2})
            self.assertEqual(status, 200)
            versions[body["version"]] += 1
            tokens += int(headers["gpugeek-tokens"])
        self.assertEqual(versions, {"v1": 100, "v2": 100})  # smooth weighted round robin: exact
        self.assertEqual(tokens, 400)
        for user in range(20):
            seen = {request(self.port, "/predict", {"prompt": "x", "max_tokens": 1},
                            {"X-User": f"user-{user}"})[2]["version"] for _ in range(3)}
            self.assertEqual(len(seen), 1, f"user-{user} moved between {seen}")

    def test_2_websocket_echo_and_token_stream(self):
        async def run():
            async with websockets.connect(f"ws://127.0.0.1:{self.port}/echo", max_size=1 << 20) as ws:
                for i in range(50):
                    message = f"{i}:" + "x" * (i * 2048)
                    await ws.send(message)
                    self.assertEqual(await asyncio.wait_for(ws.recv(), 10), message)
            async with websockets.connect(f"ws://127.0.0.1:{self.port}/stream") as ws:
                await ws.send(json.dumps({"prompt": "The ", "max_tokens": 8}))
                got = [json.loads(await asyncio.wait_for(ws.recv(), 10)) for _ in range(9)]
                self.assertTrue(all("token" in g for g in got[:8]))
                self.assertEqual(got[8]["done"], True)
                self.assertEqual(got[8]["tokens"], 8)
        asyncio.run(run())

    def test_3_metrics_by_version(self):
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=10) as r:
            text = r.read().decode()
        def value(name, labels):
            m = re.search(re.escape(name + "{" + labels + "}") + r" (\S+)", text)
            self.assertIsNotNone(m, f"{name}{{{labels}}} missing")
            return float(m.group(1))
        # test_1: 200 split + 60 sticky (the WebSocket upgrades of test_2 count under code="1xx").
        total = value("gpugeek_gateway_requests_total", 'service="gpt",version="v1",code="2xx"') + \
            value("gpugeek_gateway_requests_total", 'service="gpt",version="v2",code="2xx"')
        self.assertEqual(total, 260)
        tokens = value("gpugeek_gateway_tokens_total", 'service="gpt",version="v1"') + \
            value("gpugeek_gateway_tokens_total", 'service="gpt",version="v2"')
        self.assertEqual(tokens, 460)

    def test_4_replica_killed_under_load_loses_no_idempotent_request(self):
        ok, failed, stop = [0], [], threading.Event()
        lock = threading.Lock()

        def client():
            while not stop.is_set():
                try:
                    status, _, _ = request(self.port, "/health", host="gpt-ha")
                    with lock:
                        ok[0] += 1 if status == 200 else 0
                except Exception as e:  # noqa: BLE001 - counted, not raised
                    with lock:
                        failed.append(repr(e))
        threads = [threading.Thread(target=client) for _ in range(4)]
        for t in threads:
            t.start()
        time.sleep(1.0)
        victim = self.procs[2]  # ha1
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        time.sleep(1.5)
        stop.set()
        for t in threads:
            t.join(timeout=30)
        print(f"replica killed under load: {ok[0]} GETs answered, {len(failed)} lost", file=sys.stderr)
        self.assertEqual(failed, [])
        self.assertGreater(ok[0], 50)


if __name__ == "__main__":
    unittest.main()
