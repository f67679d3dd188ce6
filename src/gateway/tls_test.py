#!/usr/bin/env python3
"""TLS termination in `gpugeek gateway` (src/gateway/tls.h), checked with real clients: curl, openssl s_client and
gRPC over TLS (Debian's python3-grpcio).

Usage: tls_test.py PATH_TO_GPUGEEK [unittest arguments]

A CA and a certificate for 127.0.0.1 are made with the openssl command; an HTTP/1.1 replica (Python's http.server)
and a gRPC replica stand behind `gpugeek gateway --tls-cert --tls-key`. Checked: HTTP/1.1 over TLS 1.3 (ALPN
http/1.1) with a 4 MiB answer byte for byte, gRPC over TLS (ALPN h2), TLS 1.2 refused, a plain-text client refused
while the gateway keeps serving, and SIGHUP serving a renewed certificate to new connections.
"""

import hashlib
import http.server
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from concurrent import futures

import grpc

import proc_util  # beside this file

GPUGEEK = None  # argv[1]
TIMEOUT = 10  # seconds
BIG = bytes((i * 7) % 251 for i in range(4 << 20))  # the 4 MiB answer of GET /big
STATE = {}


class Replica(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        body = BIG if self.path == "/big" else f"r1|{self.path}|{self.headers.get('X-Forwarded-For')}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


def start_grpc_replica():
    handler = grpc.method_handlers_generic_handler(
        "echo.Echo", {"Unary": grpc.unary_unary_rpc_method_handler(lambda request, context: b"g1|" + request)}
    )
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    server.add_generic_rpc_handlers((handler,))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    return server, port


def openssl(*args, stdin=None):
    return subprocess.run(["openssl", *args], input=stdin, capture_output=True, timeout=TIMEOUT)


def make_certificates(d, name):
    """A CA (once) and a certificate for 127.0.0.1 signed by it: d/ca.crt, d/NAME.crt, d/NAME.key."""
    ca_key, ca_crt = os.path.join(d, "ca.key"), os.path.join(d, "ca.crt")
    if not os.path.exists(ca_crt):
        r = openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout",
                    ca_key, "-out", ca_crt, "-days", "2", "-subj", "/CN=tls_test CA")
        assert r.returncode == 0, r.stderr
    key, csr, crt = (os.path.join(d, name + ext) for ext in (".key", ".csr", ".crt"))
    r = openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key, "-out", csr,
                "-subj", f"/CN={name}")
    assert r.returncode == 0, r.stderr
    ext = os.path.join(d, name + ".ext")
    with open(ext, "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    r = openssl("x509", "-req", "-in", csr, "-CA", ca_crt, "-CAkey", ca_key, "-CAcreateserial", "-out", crt, "-days",
                "2", "-extfile", ext)
    assert r.returncode == 0, r.stderr
    return crt, key


def fingerprint(pem_path):
    r = openssl("x509", "-in", pem_path, "-noout", "-fingerprint", "-sha256")
    return r.stdout.decode().strip().split("=", 1)[1]


def s_client(*args):
    """openssl s_client against the gateway; its output (stdout and stderr) and exit code."""
    r = openssl("s_client", "-connect", f"127.0.0.1:{STATE['port']}", "-CAfile", STATE["ca"], *args, stdin=b"")
    return r.returncode, r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")


def curl(*args):
    r = subprocess.run(["curl", "-sS", "--cacert", STATE["ca"], "--max-time", str(TIMEOUT), *args],
                       capture_output=True, timeout=TIMEOUT + 5)
    return r


def stop_all():
    proc_util.stop(STATE.pop("gateway", None))
    if "stderr" in STATE:
        STATE.pop("stderr").close()
    if "channel" in STATE:
        STATE.pop("channel").close()
    if "http" in STATE:
        STATE["http"].shutdown()
        STATE.pop("http").server_close()
    if "grpc" in STATE:
        STATE.pop("grpc").stop(0)


def setUpModule():
    unittest.addModuleCleanup(lambda: STATE.pop("tmp").cleanup() if "tmp" in STATE else None)
    unittest.addModuleCleanup(stop_all)
    tmp = tempfile.TemporaryDirectory(prefix="gateway_tls_test.")
    STATE["tmp"] = tmp
    d = tmp.name
    crt, key = make_certificates(d, "first")
    STATE["ca"] = os.path.join(d, "ca.crt")
    STATE["crt"], STATE["key"] = os.path.join(d, "gateway.crt"), os.path.join(d, "gateway.key")
    os.rename(crt, STATE["crt"])
    os.rename(key, STATE["key"])
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Replica)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    STATE["http"] = httpd
    STATE["grpc"], grpc_port = start_grpc_replica()
    routes = os.path.join(d, "routes.yaml")
    with open(routes, "w") as f:
        f.write(f"""routes:
  - service: echo
    path_prefix: /echo.Echo
    versions: [{{name: v1, weight: 100, replicas: [{{id: g1, address: "127.0.0.1:{grpc_port}"}}]}}]
  - service: web
    path_prefix: /
    versions: [{{name: v1, weight: 100, replicas: [{{id: r1, address: "127.0.0.1:{httpd.server_address[1]}"}}]}}]
""")
    stderr = open(os.path.join(d, "gateway.stderr"), "w+")
    STATE["stderr"] = stderr
    gw = subprocess.Popen(
        [GPUGEEK, "gateway", "--routes", routes, "--listen", "127.0.0.1:0", "--metrics-listen", "off",
         "--tls-cert", STATE["crt"], "--tls-key", STATE["key"]],
        stdout=subprocess.PIPE, stderr=stderr, text=True)
    STATE["gateway"] = gw
    STATE["port"] = int(proc_util.wait_for_line(gw, r"gpugeek gateway listening on https://127\.0\.0\.1:(\d+)",
                                                "the gateway").group(1))


class GatewayTlsTest(unittest.TestCase):
    def tearDown(self):
        gw = STATE.get("gateway")
        if gw is not None and gw.poll() is not None:
            STATE["stderr"].seek(0)
            self.fail(f"the gateway exited with {gw.returncode}: {STATE['stderr'].read()[-4000:]}")

    def test_http1_over_tls13(self):
        url = f"https://127.0.0.1:{STATE['port']}"
        r = curl("--http1.1", "-w", "\n%{http_code} %{http_version} %{ssl_verify_result}", f"{url}/hello")
        self.assertEqual(r.returncode, 0, r.stderr)
        body, _, status = r.stdout.decode().rpartition("\n")
        self.assertEqual(body, "r1|/hello|127.0.0.1")
        self.assertEqual(status, "200 1.1 0")  # 0: the chain verified against the CA

    def test_large_answer_is_byte_exact(self):
        r = curl("--http1.1", f"https://127.0.0.1:{STATE['port']}/big")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(len(r.stdout), len(BIG))
        self.assertEqual(hashlib.sha256(r.stdout).hexdigest(), hashlib.sha256(BIG).hexdigest())

    def test_keep_alive_serves_many_requests_on_one_connection(self):
        url = f"https://127.0.0.1:{STATE['port']}/k"
        r = curl("--http1.1", "-w", "%{num_connects}\n", *[u for _ in range(20) for u in ("-o", "/dev/null", url)])
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().split(), ["1"] + ["0"] * 19)  # one handshake, 19 reuses

    def test_grpc_over_tls_negotiates_h2(self):
        with open(STATE["ca"], "rb") as f:
            credentials = grpc.ssl_channel_credentials(root_certificates=f.read())
        with grpc.secure_channel(f"127.0.0.1:{STATE['port']}", credentials,
                                 options=[("grpc.enable_http_proxy", 0)]) as channel:
            call = channel.unary_unary("/echo.Echo/Unary", request_serializer=None, response_deserializer=None)
            self.assertEqual(call(b"over tls", timeout=TIMEOUT), b"g1|over tls")

    def test_alpn_and_version(self):
        # A client that speaks both stays on HTTP/1.1 (what REST replicas speak); only-h2 clients (gRPC) get h2.
        code, out = s_client("-alpn", "h2,http/1.1")
        self.assertEqual(code, 0, out)
        self.assertIn("ALPN protocol: http/1.1", out)
        self.assertIn("TLSv1.3", out)
        self.assertIn("Verify return code: 0 (ok)", out)
        code, out = s_client("-alpn", "h2")
        self.assertIn("ALPN protocol: h2", out)

    def test_curl_by_default_gets_http11(self):
        r = curl("-w", "\n%{http_code} %{http_version}", f"https://127.0.0.1:{STATE['port']}/hello")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.decode().rpartition("\n")[2], "200 1.1")

    def test_tls12_is_refused(self):
        code, out = s_client("-tls1_2")
        self.assertNotEqual(code, 0, out)
        self.assertIn("alert protocol version", out)  # RFC 8446 6.2: protocol_version (70)
        self.assertIn("no peer certificate available", out)

    def test_plain_text_client_gets_nothing_and_the_gateway_goes_on(self):
        import socket
        with socket.create_connection(("127.0.0.1", STATE["port"]), timeout=TIMEOUT) as s:
            s.sendall(b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        self.assertFalse(data.startswith(b"HTTP/"), data[:100])
        self.test_http1_over_tls13()

    def test_sighup_serves_a_renewed_certificate(self):
        before = s_client("-showcerts")[1]
        self.assertIn("CN = first", before)
        crt, key = make_certificates(STATE["tmp"].name, "second")
        os.replace(key, STATE["key"])
        os.replace(crt, STATE["crt"])
        STATE["gateway"].send_signal(signal.SIGHUP)
        deadline = time.monotonic() + TIMEOUT
        while "CN = second" not in s_client()[1]:
            self.assertLess(time.monotonic(), deadline, "the renewed certificate was not served within 10 s")
            time.sleep(0.1)
        self.test_http1_over_tls13()


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: tls_test.py PATH_TO_GPUGEEK [unittest arguments]")
    GPUGEEK = sys.argv.pop(1)
    unittest.main(verbosity=2)
