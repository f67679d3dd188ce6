#!/usr/bin/env python3
"""gRPC through `gpugeek gateway` (src/gateway/h2_proxy.h): real gRPC replicas and a real gRPC client.

Usage: h2_proxy_test.py PATH_TO_GPUGEEK [unittest arguments]

Two replicas (versions v1 and v2, 50/50) answer with their own name; the client calls through the gateway over
h2c with prior knowledge, as gRPC does. A real control plane (`gpugeek server`, plain HTTP, its own data folder)
verifies the tokens of a route with `auth` (`gpugeek gateway --token-server`); a route with no replica holds calls in
the activator until one is added (SIGHUP). Handlers are generic with bytes in and out (no protoc): Debian's
python3-grpcio only. Every RPC has a 10 s deadline; the gateway and the replicas are stopped at the end, also on
failure.
"""

import hashlib
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.request
from concurrent import futures

import grpc

import proc_util  # beside this file

GPUGEEK = None  # argv[1]
TIMEOUT = 10  # seconds, every RPC
STREAM_COUNT = 20
STREAM_SIZE = 1024

STATE = {}
CANCELLED = threading.Event()  # a replica's Forever call ended (it only ends by cancellation or its deadline)


def stream_message(i):
    """The i-th message of the server stream: its index, then a byte pattern (STREAM_SIZE bytes in all)."""
    return struct.pack(">I", i) + bytes([(i * 7 + k) % 251 for k in range(STREAM_SIZE - 4)])


def start_replica(name):
    name_bytes = name.encode()

    def unary(request, context):
        if request == b"abort":
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "bad")
        if request == b"whoami":  # what tells the replica who called
            seen = sorted(f"{k}={v}" for k, v in context.invocation_metadata()
                          if k in ("gpugeek-user", "gpugeek-tenant", "authorization"))
            return name_bytes + b"|" + ",".join(seen).encode()
        return name_bytes + b"|" + request

    def stream(request, context):
        count = int(request.decode())
        for i in range(count):
            yield stream_message(i)

    def collect(request_iterator, context):
        h = hashlib.sha256()
        n = 0
        for chunk in request_iterator:
            h.update(chunk)
            n += len(chunk)
        return name_bytes + b"|" + str(n).encode() + b"|" + h.hexdigest().encode()

    def chat(request_iterator, context):
        for chunk in request_iterator:
            yield name_bytes + b"|" + chunk

    def forever(request, context):
        # gRPC runs the callback when the call ends; after a cancel it may never resume this generator.
        context.add_callback(CANCELLED.set)
        i = 0
        while context.is_active():
            yield b"%d" % i
            i += 1
            time.sleep(0.01)

    handler = grpc.method_handlers_generic_handler(
        "echo.Echo",
        {
            "Unary": grpc.unary_unary_rpc_method_handler(unary),
            "Stream": grpc.unary_stream_rpc_method_handler(stream),
            "Collect": grpc.stream_unary_rpc_method_handler(collect),
            "Chat": grpc.stream_stream_rpc_method_handler(chat),
            "Forever": grpc.unary_stream_rpc_method_handler(forever),
        },
    )
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=16),
        handlers=[handler],
        options=[("grpc.max_receive_message_length", 8 << 20), ("grpc.max_send_message_length", 8 << 20)],
    )
    port = server.add_insecure_port("127.0.0.1:0")
    if port == 0:
        raise RuntimeError("the replica could not bind")
    server.start()
    return server, port


def free_port():
    """A port nothing listens on (bound, then closed)."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


ROUTES = """\
routes:
  - service: echo
    path_prefix: /echo.Echo
    sticky: {{header: x-user}}
    versions:
      - name: v1
        weight: 50
        replicas: [{{id: r1, address: "127.0.0.1:{p1}"}}]
      - name: v2
        weight: 50
        replicas: [{{id: r2, address: "127.0.0.1:{p2}"}}]
  - service: retry
    hosts: [retry.local]
    path_prefix: /echo.Echo
    versions:
      - name: v1
        weight: 100
        replicas: [{{id: gone, address: "127.0.0.1:{pdead}"}}, {{id: r1-again, address: "127.0.0.1:{p1}"}}]
  - service: empty
    path_prefix: /empty.Empty
    activator: {{queue: 10, timeout: 1s}}
    versions:
      - name: v1
        weight: 100
        replicas: []
  - service: cold
    hosts: [cold.local]
    path_prefix: /echo.Echo
    versions:
      - name: v1
        weight: 100
        replicas: [{cold}]
  - service: private
    hosts: [private.local]
    path_prefix: /echo.Echo
    auth: {{tenant: team-a}}
    versions:
      - name: v1
        weight: 100
        replicas: [{{id: r1, address: "127.0.0.1:{p1}"}}]
  - service: dead
    path_prefix: /dead.Dead
    versions:
      - name: v1
        weight: 100
        replicas: [{{id: d1, address: "127.0.0.1:{pdead}"}}]
"""


def stop_all():
    proc_util.stop(STATE.pop("gateway", None))
    stderr = STATE.pop("stderr", None)
    if stderr is not None:
        stderr.close()
    channel = STATE.pop("channel", None)
    if channel is not None:
        channel.close()
    for server in STATE.pop("servers", []):
        server.stop(0)
    proc_util.stop(STATE.pop("control_plane", None), grace=20)


def api(method, path, token, body=None):
    req = urllib.request.Request(STATE["cp_url"] + path, method=method,
                                 data=None if body is None else json.dumps(body).encode(),
                                 headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        return json.loads(r.read())


def start_control_plane(d):
    """`gpugeek server` with tenants team-a and team-b and a member in each: STATE["tokens"][user]."""
    data = os.path.join(d, "cp")
    cp = subprocess.Popen([GPUGEEK, "server", "--listen", "127.0.0.1:0", "--agent-listen", "127.0.0.1:0",
                           "--data-dir", data, "--insecure-no-tls"],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    STATE["control_plane"] = cp
    STATE["cp_url"] = proc_util.wait_for_line(cp, r"gpugeek server listening on (http://127\.0\.0\.1:\d+)", "the server").group(1)
    with open(os.path.join(data, "admin.token")) as f:
        admin = f.read().strip()
    STATE["tokens"] = {}
    for tenant, user in (("team-a", "alice"), ("team-b", "bob")):
        api("POST", "/v1/tenants", admin, {"name": tenant})
        api("POST", "/v1/users", admin, {"name": user, "tenant": tenant, "role": "member"})
        STATE["tokens"][user] = api("POST", "/v1/tokens", admin, {"user": user})["token"]


def setUpModule():
    # Cleanups run last in, first out: the processes stop before their directory goes.
    unittest.addModuleCleanup(lambda: STATE.pop("tmp").cleanup() if "tmp" in STATE else None)
    unittest.addModuleCleanup(stop_all)
    tmp = tempfile.TemporaryDirectory(prefix="h2_proxy_test.")
    STATE["tmp"] = tmp
    s1, p1 = start_replica("r1")
    STATE["servers"] = [s1]
    s2, p2 = start_replica("r2")
    STATE["servers"].append(s2)
    start_control_plane(tmp.name)
    routes = os.path.join(tmp.name, "routes.yaml")
    STATE["routes"], STATE["ports"] = routes, dict(p1=p1, p2=p2, pdead=free_port())
    with open(routes, "w") as f:
        f.write(ROUTES.format(cold="", **STATE["ports"]))
    stderr = open(os.path.join(tmp.name, "gateway.stderr"), "w+")
    STATE["stderr"] = stderr
    gw = subprocess.Popen(
        [GPUGEEK, "gateway", "--routes", routes, "--listen", "127.0.0.1:0", "--metrics-listen", "off",
         "--token-server", STATE["cp_url"]],
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )
    STATE["gateway"] = gw
    port = int(proc_util.wait_for_line(gw, r"gpugeek gateway listening on http://127\.0\.0\.1:(\d+)", "the gateway").group(1))
    STATE["port"] = port
    STATE["channel"] = grpc.insecure_channel(
        f"127.0.0.1:{port}",
        options=[
            ("grpc.enable_http_proxy", 0),
            ("grpc.max_receive_message_length", 8 << 20),
            ("grpc.max_send_message_length", 8 << 20),
        ],
    )
    grpc.channel_ready_future(STATE["channel"]).result(timeout=TIMEOUT)


def unary(path="/echo.Echo/Unary", channel=None):
    return (channel or STATE["channel"]).unary_unary(path, request_serializer=None, response_deserializer=None)


def frames(data):
    """(type, flags, stream id, payload) of each whole HTTP/2 frame in `data`."""
    out = []
    i = 0
    while i + 9 <= len(data):
        length = int.from_bytes(data[i : i + 3], "big")
        if i + 9 + length > len(data):
            break
        stream = int.from_bytes(data[i + 5 : i + 9], "big") & 0x7FFFFFFF
        out.append((data[i + 3], data[i + 4], stream, data[i + 9 : i + 9 + length]))
        i += 9 + length
    return out


class H2ProxyTest(unittest.TestCase):
    def tearDown(self):
        gw = STATE.get("gateway")
        if gw is not None and gw.poll() is not None:
            STATE["stderr"].seek(0)
            self.fail(f"the gateway exited with {gw.returncode}: {STATE['stderr'].read()[-4000:]}")

    def test_unary_split_between_versions(self):
        call = unary()
        counts = {"r1": 0, "r2": 0}
        for i in range(200):
            payload = f"hello {i}".encode()
            answer = call(payload, timeout=TIMEOUT)
            name, _, echoed = answer.partition(b"|")
            self.assertEqual(echoed, payload)
            counts[name.decode()] += 1
        # 50/50 weights: each version takes 50 +- 5 of every hundred.
        self.assertLessEqual(abs(counts["r1"] - 100), 10, counts)
        self.assertLessEqual(abs(counts["r2"] - 100), 10, counts)
        self.assertEqual(counts["r1"] + counts["r2"], 200)

    def test_sticky_header_keeps_version(self):
        call = unary()
        for user in ("alice", "bob", "carol"):
            names = {call(b"x", timeout=TIMEOUT, metadata=(("x-user", user),)).partition(b"|")[0] for _ in range(10)}
            self.assertEqual(len(names), 1, (user, names))

    def test_concurrent_unary(self):
        call = unary()
        payloads = [os.urandom(100 + 97 * i) for i in range(60)]
        pending = [call.future(p, timeout=TIMEOUT) for p in payloads]
        for p, f in zip(payloads, pending):
            self.assertEqual(f.result().partition(b"|")[2], p)

    def test_server_streaming_in_order(self):
        call = STATE["channel"].unary_stream(
            "/echo.Echo/Stream", request_serializer=None, response_deserializer=None
        )
        got = list(call(str(STREAM_COUNT).encode(), timeout=TIMEOUT))
        self.assertEqual(len(got), STREAM_COUNT)
        for i, message in enumerate(got):
            self.assertEqual(message, stream_message(i), f"message {i}")

    def test_client_streaming(self):
        call = STATE["channel"].stream_unary(
            "/echo.Echo/Collect", request_serializer=None, response_deserializer=None
        )
        chunks = [os.urandom(10_000 + i) for i in range(50)]
        answer = call(iter(chunks), timeout=TIMEOUT)
        _, size, digest = answer.split(b"|")
        data = b"".join(chunks)
        self.assertEqual(int(size), len(data))
        self.assertEqual(digest.decode(), hashlib.sha256(data).hexdigest())

    def test_bidi_streaming(self):
        call = STATE["channel"].stream_stream("/echo.Echo/Chat", request_serializer=None, response_deserializer=None)
        chunks = [f"line {i}".encode() * (i + 1) for i in range(30)]
        got = [m.partition(b"|")[2] for m in call(iter(chunks), timeout=TIMEOUT)]
        self.assertEqual(got, chunks)

    def test_unknown_path_is_unimplemented(self):
        with self.assertRaises(grpc.RpcError) as e:
            unary("/nope.Nope/Unary")(b"x", timeout=TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertIn("no service is routed", e.exception.details())

    def test_no_ready_replica_is_unavailable_after_the_activator_timeout(self):
        began = time.monotonic()
        with self.assertRaises(grpc.RpcError) as e:
            unary("/empty.Empty/Unary")(b"x", timeout=TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertIn("within the activator's timeout", e.exception.details())
        self.assertGreaterEqual(time.monotonic() - began, 0.9)  # held for the route's 1 s first

    def test_call_waits_in_the_activator_until_a_replica_is_ready(self):
        channel = grpc.insecure_channel(f"127.0.0.1:{STATE['port']}",
                                        options=[("grpc.enable_http_proxy", 0), ("grpc.default_authority", "cold.local")])
        try:
            future = unary(channel=channel).future(b"cold", timeout=TIMEOUT)
            time.sleep(1.0)
            self.assertFalse(future.done(), "the call was answered with no replica ready")
            with open(STATE["routes"], "w") as f:
                f.write(ROUTES.format(cold=f'{{id: r1-cold, address: "127.0.0.1:{STATE["ports"]["p1"]}"}}',
                                      **STATE["ports"]))
            STATE["gateway"].send_signal(signal.SIGHUP)
            self.assertEqual(future.result(timeout=TIMEOUT), b"r1|cold")
        finally:
            channel.close()

    def test_route_with_auth_needs_a_token_of_its_tenant(self):
        channel = grpc.insecure_channel(f"127.0.0.1:{STATE['port']}", options=[
            ("grpc.enable_http_proxy", 0), ("grpc.default_authority", "private.local")])
        try:
            call = unary(channel=channel)
            with self.assertRaises(grpc.RpcError) as e:
                call(b"x", timeout=TIMEOUT)
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            with self.assertRaises(grpc.RpcError) as e:
                call(b"x", timeout=TIMEOUT, metadata=[("authorization", "Bearer ggk_nonsense")])
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
            with self.assertRaises(grpc.RpcError) as e:  # another tenant's service reads as absent
                call(b"x", timeout=TIMEOUT, metadata=[("authorization", "Bearer " + STATE["tokens"]["bob"])])
            self.assertEqual(e.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
            alice = [("authorization", "Bearer " + STATE["tokens"]["alice"])]
            self.assertEqual(call(b"hi", timeout=TIMEOUT, metadata=alice), b"r1|hi")
            self.assertEqual(call(b"again", timeout=TIMEOUT, metadata=alice), b"r1|again")  # the remembered answer
            # The replica learns who called, not the token; an identity the client claims itself is dropped.
            forged = alice + [("gpugeek-user", "root")]
            self.assertEqual(call(b"whoami", timeout=TIMEOUT, metadata=forged),
                             b"r1|gpugeek-tenant=team-a,gpugeek-user=alice")
        finally:
            channel.close()

    def test_dead_replica_is_unavailable(self):
        with self.assertRaises(grpc.RpcError) as e:
            unary("/dead.Dead/Unary")(b"x", timeout=TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.UNAVAILABLE)

    def test_retry_on_another_replica(self):
        # The route's first replica refuses connections: streams that pick it go once more to the other one.
        channel = grpc.insecure_channel(
            f"127.0.0.1:{STATE['port']}",
            options=[("grpc.enable_http_proxy", 0), ("grpc.default_authority", "retry.local")],
        )
        try:
            for i in range(20):
                self.assertEqual(unary(channel=channel)(b"%d" % i, timeout=TIMEOUT), b"r1|%d" % i)
        finally:
            channel.close()

    def test_client_cancel_reaches_replica(self):
        call = STATE["channel"].unary_stream("/echo.Echo/Forever", request_serializer=None, response_deserializer=None)
        CANCELLED.clear()
        answers = call(b"", timeout=TIMEOUT)
        for i, _ in enumerate(answers):
            if i == 5:
                answers.cancel()
                break
        # Well before the call's 10 s deadline (which the replica also knows from grpc-timeout).
        self.assertTrue(CANCELLED.wait(TIMEOUT / 2), "the replica's stream was not cancelled")

    def test_protocol_error_closes_with_goaway(self):
        with socket.create_connection(("127.0.0.1", STATE["port"]), timeout=TIMEOUT) as s:
            # The preface, an empty SETTINGS, then SETTINGS on stream 1: a connection error (RFC 9113 6.5).
            s.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes(3) + b"\x04\x00" + bytes(4))
            s.sendall(bytes(3) + b"\x04\x00" + (1).to_bytes(4, "big"))
            data = b""
            while chunk := s.recv(4096):  # the gateway closes: recv returns b"" (a hang times out)
                data += chunk
        goaways = [payload for kind, _, _, payload in frames(data) if kind == 7]
        self.assertEqual(len(goaways), 1, frames(data))
        self.assertEqual(int.from_bytes(goaways[0][4:8], "big"), 1)  # PROTOCOL_ERROR

    def test_server_status_passes_through(self):
        with self.assertRaises(grpc.RpcError) as e:
            unary()(b"abort", timeout=TIMEOUT)
        self.assertEqual(e.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(e.exception.details(), "bad")

    def test_large_unary_round_trips(self):
        payload = os.urandom(1 << 20)
        answer = unary()(payload, timeout=TIMEOUT)
        name, _, echoed = answer.partition(b"|")
        self.assertIn(name, (b"r1", b"r2"))
        self.assertEqual(len(echoed), len(payload))
        self.assertEqual(echoed, payload)

    def test_gateway_still_serves_http1(self):
        # The same port tells HTTP/2 from HTTP/1.1 by the first bytes: an HTTP/1.1 request still gets its 404.
        with socket.create_connection(("127.0.0.1", STATE["port"]), timeout=TIMEOUT) as s:
            s.sendall(b"GET /nothing HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
        self.assertTrue(data.startswith(b"HTTP/1.1 404"), data[:100])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: h2_proxy_test.py PATH_TO_GPUGEEK [unittest arguments]")
    GPUGEEK = sys.argv.pop(1)
    unittest.main(verbosity=2)
