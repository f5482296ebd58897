"""test_grpc.py - charterd's gRPC over HTTP/2 with Debian's python3-grpcio, against real charterd
processes on real sockets (tests/grpc/run.sh generates charter_pb2 and the rest with protoc).

Three charterd share the test Redis (CHARTER_TEST_REDIS), each with its own graph: one in
cleartext, one with small limits (--max-message 65536, header and body deadlines of 1 and 2 s),
one with TLS (a self-signed certificate made by openssl here). Verdicts are stated by hand from
the reference procurement workflow: the Analyst's delivery to the CFO is allowed, the budget
memo handed to the report step is refused INPUT_OUT_OF_SCOPE with the budget's path as witness.
"""
import json
import os
import secrets
import select
import shutil
import socket
import ssl
import struct
import subprocess
import tempfile
import threading
import unittest
import urllib.error
import urllib.request

import charterd_proc
import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

import charter_pb2
import health_pb2
import reflection_pb2
import reflection_v1alpha_pb2

OPERATOR = "grpc-operator-" + secrets.token_hex(16)
VIEWER = "grpc-viewer-" + secrets.token_hex(16)
HANDOFF_WITNESS = ("budget (confidential) → Internal recommendation → "
                   "report step {vendor_a, vendor_b, vendor_c}")
PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


class Charterd(charterd_proc.Charterd):
    """A real charterd with --http on a loopback port the system picks, stopped by stop()."""

    def __init__(self, name, *extra, scheme="http", cafile=None):
        folder = tempfile.mkdtemp(prefix=f"charter-grpc-{name}-")
        redis = os.environ.get("CHARTER_TEST_REDIS")
        # The data folder (its integrity key, and the embedded database without a test Redis)
        # goes with the charterd.
        args = ["--listen", f"ipc://{folder}/c.sock", "--data-dir", f"{folder}/data", *extra]
        args += ["--redis", redis] if redis else []
        env = dict(os.environ, CHARTER_OPERATOR_TOKEN=OPERATOR, CHARTER_VIEWER_TOKEN=VIEWER)
        super().__init__("", f"grpc_{name}_{os.getpid()}", args, env, scheme=scheme,
                         cafile=cafile, data_dir=folder)


def unary(channel, path, req, resp):
    return channel.unary_unary(path, request_serializer=req.SerializeToString,
                               response_deserializer=resp.FromString)


def auth(token=OPERATOR):
    return [("authorization", f"Bearer {token}")]


class Api:
    """The methods these tests call, as stock grpcio callables on one channel."""

    def __init__(self, channel):
        c, p = channel, charter_pb2
        self.check = unary(c, "/grpc.health.v1.Health/Check", health_pb2.HealthCheckRequest,
                           health_pb2.HealthCheckResponse)
        self.watch = c.unary_stream("/grpc.health.v1.Health/Watch",
                                    request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
                                    response_deserializer=health_pb2.HealthCheckResponse.FromString)
        self.create_run = unary(c, "/charter.v1.Runs/CreateRun", p.CreateRunRequest, p.RunView)
        self.get_run = unary(c, "/charter.v1.Runs/GetRun", p.GetRunRequest, p.RunView)
        self.open_step = unary(c, "/charter.v1.Gate/OpenStep", p.OpenStepRequest, p.StepContext)
        self.read_source = unary(c, "/charter.v1.Gate/ReadSource", p.ReadSourceRequest,
                                 p.ReadSourceResponse)
        self.record_output = unary(c, "/charter.v1.Gate/RecordOutput", p.RecordOutputRequest,
                                   p.RecordOutputResponse)
        self.check_input = unary(c, "/charter.v1.Gate/CheckInput", p.CheckInputRequest,
                                 p.CheckInputResponse)
        self.deliver = unary(c, "/charter.v1.Gate/Deliver", p.DeliverRequest, p.DeliverResponse)
        self.revoke = unary(c, "/charter.v1.Grants/RevokeGrant", p.RevokeGrantRequest,
                            p.Grant)


def connect(base, path, body, token=OPERATOR, context=None):
    """The same call over Connect (HTTP/1.1, JSON): (HTTP status, decoded body)."""
    req = urllib.request.Request(f"{base}/{path.lstrip('/')}", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(req, timeout=10, context=context) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())


plain = limits = None


def setUpModule():
    global plain, limits
    plain = Charterd("plain")
    limits = Charterd("limits", "--max-message", "65536", "--http-header-timeout", "1",
                      "--http-body-timeout", "2")


def tearDownModule():
    for d in (plain, limits):
        if d is not None:
            d.stop()


class CleartextTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channel = grpc.insecure_channel(plain.hostport)
        cls.api = Api(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def test_grpc_health_v1_check_serves_and_refuses_an_unknown_service_not_found(self):
        self.assertEqual(self.api.check(health_pb2.HealthCheckRequest(), timeout=10).status,
                         health_pb2.HealthCheckResponse.SERVING)
        r = self.api.check(health_pb2.HealthCheckRequest(service="charter.v1.Gate"), timeout=10)
        self.assertEqual(r.status, health_pb2.HealthCheckResponse.SERVING)
        with self.assertRaises(grpc.RpcError) as cm:
            self.api.check(health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertEqual(cm.exception.details(), 'service "no.such.Service" not found')

    def test_watch_streams_the_status_once_and_ends_at_the_call_deadline(self):
        stream = self.api.watch(health_pb2.HealthCheckRequest(), timeout=3)
        seen = []
        with self.assertRaises(grpc.RpcError) as cm:
            for r in stream:
                seen.append(r.status)
        # The status does not change while the database serves: one message, then the end.
        self.assertEqual(seen, [health_pb2.HealthCheckResponse.SERVING])
        self.assertEqual(cm.exception.code(), grpc.StatusCode.DEADLINE_EXCEEDED)

    def test_a_run_delivers_to_the_cfo_and_the_handoff_is_refused_with_its_witness(self):
        a, p = self.api, charter_pb2
        run = a.create_run(p.CreateRunRequest(mode="external"), metadata=auth(), timeout=10).run
        self.assertEqual(run.status, "created")
        ctx = a.open_step(p.OpenStepRequest(run_id=run.id, step="analyze"), metadata=auth(),
                          timeout=10)
        self.assertEqual(ctx.actor, "analyst")
        src = a.read_source(p.ReadSourceRequest(context_id=ctx.context_id, resource_id="budget"),
                            metadata=auth(), timeout=10)
        self.assertEqual(src.decision.outcome, p.ALLOW)
        out = a.record_output(p.RecordOutputRequest(context_id=ctx.context_id,
                                                    input_ids=[src.artifact.id],
                                                    title="Internal recommendation",
                                                    content="Brightline."),
                              metadata=auth(), timeout=10)
        self.assertEqual(out.artifact.conf, 2)  # confidential: the maximum of its inputs'
        inv = f"{run.id}:cfo"
        sent, call = a.deliver.with_call(
            p.DeliverRequest(context_id=ctx.context_id, payload_id=out.artifact.id,
                             recipient="cfo", tool="deliver_internal", invocation_id=inv),
            metadata=auth() + [("x-request-id", f"grpc-{run.id}")], timeout=10)
        self.assertEqual((sent.decision.outcome, sent.delivery.invocation_id, sent.acknowledged),
                         (p.ALLOW, inv, False))
        # The request id the caller chose comes back in the response headers.
        self.assertIn(("x-request-id", f"grpc-{run.id}"), call.initial_metadata())
        report = a.open_step(p.OpenStepRequest(run_id=run.id, step="report"), metadata=auth(),
                             timeout=10)
        checked = a.check_input(p.CheckInputRequest(context_id=report.context_id,
                                                    artifact_ids=[out.artifact.id]),
                                metadata=auth(), timeout=10)
        # A refusal is a decision, not an error: OK with DENY, its code and witness.
        self.assertEqual((checked.decision.outcome, list(checked.decision.codes),
                          checked.decision.witness),
                         (p.DENY, ["INPUT_OUT_OF_SCOPE"], HANDOFF_WITNESS))
        leak = a.deliver(p.DeliverRequest(context_id=ctx.context_id, payload_id=out.artifact.id,
                                          recipient="public", tool="deliver_internal",
                                          invocation_id=f"{run.id}:public"),
                         metadata=auth(), timeout=10)
        self.assertEqual((leak.decision.outcome, leak.decision.witness),
                         (p.DENY, "recipient public outside the analyze step {cfo}"))
        self.assertFalse(leak.HasField("delivery"))

    def test_refusals_carry_the_status_connect_names_for_the_same_call(self):
        p = charter_pb2
        cases = [  # (path, request, response type, token, gRPC code, Connect code)
            ("/charter.v1.Runs/GetRun", p.GetRunRequest(run_id="r0000000000000000"), p.RunView,
             OPERATOR, grpc.StatusCode.NOT_FOUND, "not_found"),
            ("/charter.v1.Grants/RevokeGrant", p.RevokeGrantRequest(grant_id="g_reporter"),
             p.Grant, VIEWER, grpc.StatusCode.PERMISSION_DENIED, "permission_denied"),
            ("/charter.v1.Runs/CreateRun", p.CreateRunRequest(mode="sideways"), p.RunView,
             OPERATOR, grpc.StatusCode.INVALID_ARGUMENT, "invalid_argument"),
            ("/charter.v1.Runs/GetRun", p.GetRunRequest(run_id="r0000000000000000"), p.RunView,
             "not-a-token-of-this-server-at-all", grpc.StatusCode.UNAUTHENTICATED,
             "unauthenticated"),
        ]
        for path, req, resp, token, code, name in cases:
            with self.subTest(path=path, code=code):
                with self.assertRaises(grpc.RpcError) as cm:
                    unary(self.channel, path, type(req), resp)(req, metadata=auth(token),
                                                               timeout=10)
                self.assertEqual(cm.exception.code(), code)
                from google.protobuf import json_format
                status, body = connect(plain.base, path, json_format.MessageToDict(req), token)
                self.assertEqual(body["code"], name)
                self.assertEqual(body["message"], cm.exception.details())
        with self.assertRaises(grpc.RpcError) as cm:
            self.api.create_run(p.CreateRunRequest(mode="external"), timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        self.assertIn('send metadata "authorization: Bearer <token>"', cm.exception.details())

    def test_an_unknown_method_is_unimplemented(self):
        with self.assertRaises(grpc.RpcError) as cm:
            unary(self.channel, "/charter.v1.Runs/Nope", charter_pb2.GetRunRequest,
                  charter_pb2.RunView)(charter_pb2.GetRunRequest(), metadata=auth(), timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertEqual(cm.exception.details(), 'unknown method "/charter.v1.Runs/Nope"')

    def test_an_authority_that_is_not_this_server_is_refused(self):
        with grpc.insecure_channel(plain.hostport,
                                   options=[("grpc.default_authority", "evil.example")]) as ch:
            with self.assertRaises(grpc.RpcError) as cm:
                Api(ch).check(health_pb2.HealthCheckRequest(), timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        self.assertIn('":authority "evil.example" is not this server'[1:], cm.exception.details())

    def test_http1_connect_and_the_probes_are_served_on_the_same_port(self):
        with urllib.request.urlopen(f"{plain.base}/healthz", timeout=10) as r:
            self.assertEqual(json.loads(r.read()), {"status": "serving"})
        status, body = connect(plain.base, "/grpc.health.v1.Health/Check", {})
        self.assertEqual((status, body), (200, {"status": "SERVING"}))


def reflect(channel, requests, version=reflection_pb2, token=VIEWER):
    """Asks server reflection, one stream, as grpcurl does: the answers in order."""
    pkg = "grpc.reflection.v1alpha" if version is reflection_v1alpha_pb2 else "grpc.reflection.v1"
    info = channel.stream_stream(
        f"/{pkg}.ServerReflection/ServerReflectionInfo",
        request_serializer=version.ServerReflectionRequest.SerializeToString,
        response_deserializer=version.ServerReflectionResponse.FromString)
    return list(info(iter(requests), metadata=auth(token) if token else [], timeout=10))


class ReflectionTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channel = grpc.insecure_channel(plain.hostport)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def test_both_versions_list_the_services_of_the_dispatch_table(self):
        for version in (reflection_pb2, reflection_v1alpha_pb2):
            with self.subTest(version=version.__name__):
                (answer,) = reflect(self.channel,
                                    [version.ServerReflectionRequest(list_services="*")], version)
                names = [s.name for s in answer.list_services_response.service]
                self.assertEqual(len(names), len(set(names)))
                for name in ("charter.v1.Runs", "charter.v1.Gate", "charter.v1.Evidence",
                             "grpc.health.v1.Health", "grpc.reflection.v1.ServerReflection",
                             "grpc.reflection.v1alpha.ServerReflection"):
                    self.assertIn(name, names)
                self.assertEqual(answer.original_request.list_services, "*")

    def test_a_client_built_from_reflection_alone_calls_the_server(self):
        """What grpcurl does: descriptors by symbol, then a call made from them alone."""
        R = reflection_pb2.ServerReflectionRequest
        answers = reflect(self.channel, [R(file_containing_symbol="charter.v1.Runs.CreateRun"),
                                         R(file_containing_symbol="grpc.health.v1.Health"),
                                         R(file_containing_symbol="charter.v1.No"),
                                         R(file_by_filename="charter.proto")])
        self.assertEqual(len(answers), 4)
        self.assertEqual(answers[2].error_response.error_code, grpc.StatusCode.NOT_FOUND.value[0])
        self.assertEqual(answers[2].error_response.error_message,
                         'symbol "charter.v1.No" not found')
        pool = descriptor_pool.DescriptorPool()
        for a in (answers[0], answers[1]):
            for raw in a.file_descriptor_response.file_descriptor_proto:
                pool.Add(descriptor_pb2.FileDescriptorProto.FromString(raw))
        self.assertEqual(answers[3].file_descriptor_response.file_descriptor_proto,
                         answers[0].file_descriptor_response.file_descriptor_proto)
        method = pool.FindMethodByName("charter.v1.Runs.CreateRun")
        self.assertEqual(method.output_type.full_name, "charter.v1.RunView")
        watch = pool.FindMethodByName("grpc.health.v1.Health.Watch")
        self.assertTrue(watch.server_streaming)
        req_cls = message_factory.MessageFactory(pool).GetPrototype(method.input_type)
        resp_cls = message_factory.MessageFactory(pool).GetPrototype(method.output_type)
        call = unary(self.channel, "/charter.v1.Runs/CreateRun", req_cls, resp_cls)
        view = call(req_cls(mode="external"), metadata=auth(OPERATOR), timeout=10)
        self.assertEqual(view.run.status, "created")

    def test_reflection_needs_a_token_as_list_methods_does(self):
        with self.assertRaises(grpc.RpcError) as cm:
            reflect(self.channel, [reflection_pb2.ServerReflectionRequest(list_services="")],
                    token=None)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)


def raw_h2(hostport, send):
    """A raw TCP connection that sends bytes and reads until the server closes it (at most
    30 s): what the server wrote."""
    host, port = hostport.rsplit(":", 1)
    got = b""
    with socket.create_connection((host, int(port)), timeout=30) as s:
        s.sendall(send)
        while True:
            b = s.recv(65536)
            if not b:
                return got
            got += b


def settings_of(data):
    """The entries of the first SETTINGS frame (type 4) of raw HTTP/2 bytes."""
    at = 0
    while at + 9 <= len(data):
        n = int.from_bytes(data[at:at + 3], "big")
        if data[at + 3] == 4 and not data[at + 4] & 1:
            body = data[at + 9:at + 9 + n]
            return dict(struct.unpack(">HI", body[i:i + 6]) for i in range(0, len(body), 6))
        at += 9 + n
    return {}


def h2_frame(kind, flags, stream, payload):
    return len(payload).to_bytes(3, "big") + bytes([kind, flags]) + struct.pack(">I", stream) + payload


def hpack_literals(pairs):
    """A header block of literal fields without indexing or Huffman (names and values < 127)."""
    return b"".join(b"\x00" + bytes([len(n)]) + n.encode() + bytes([len(v)]) + v.encode()
                    for n, v in pairs)


def frames_of(data):
    """The (type, flags, stream, payload) of each whole frame of raw HTTP/2 bytes (after the
    server's preface, which is a frame too)."""
    out, at = [], 0
    while at + 9 <= len(data):
        n = int.from_bytes(data[at:at + 3], "big")
        out.append((data[at + 3], data[at + 4],
                    int.from_bytes(data[at + 5:at + 9], "big") & 0x7FFFFFFF,
                    data[at + 9:at + 9 + n]))
        at += 9 + n
    return out


def calls_of(d, method, code="OK"):
    """charter_calls_total of method and code in d's /metrics."""
    with urllib.request.urlopen(f"{d.base}/metrics", timeout=10) as r:
        text = r.read().decode()
    key = f'charter_calls_total{{method="{method}",code="{code}"}} '
    return sum(int(line[len(key):]) for line in text.splitlines() if line.startswith(key))


class LimitsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.channel = grpc.insecure_channel(limits.hostport)
        cls.api = Api(cls.channel)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()

    def big(self):
        return charter_pb2.RecordOutputRequest(context_id="c1", content="x" * 100000)

    def test_a_bad_token_is_refused_before_an_oversized_message_is_read(self):
        with self.assertRaises(grpc.RpcError) as cm:
            self.api.record_output(self.big(), metadata=auth("not-a-token-of-this-server-at-all"),
                                   timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        with self.assertRaises(grpc.RpcError) as cm:
            self.api.record_output(self.big(), metadata=auth(), timeout=10)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
        self.assertRegex(cm.exception.details(),
                         r"^request of 1000\d\d bytes exceeds the 65536 byte limit$")

    def test_a_stream_each_way_answers_no_further_than_its_client_reads(self):
        # A client that shuts its flow-control window (SETTINGS_INITIAL_WINDOW_SIZE 0) and
        # sends 200 reflection requests on one stream: charterd answers the first, waits for
        # the client to take the answer, and resets the stream when it has not within
        # --http-body-timeout (2 s); it never piles up answers nobody reads (each one is the
        # whole charter.proto descriptor).
        path = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
        before = calls_of(limits, path)
        request = b"\x1a\x0dcharter.proto"  # file_by_filename
        messages = (b"\x00" + struct.pack(">I", len(request)) + request) * 200
        headers = hpack_literals([(":method", "POST"), (":scheme", "http"), (":path", path),
                                  (":authority", limits.hostport),
                                  ("content-type", "application/grpc"), ("te", "trailers"),
                                  ("authorization", f"Bearer {VIEWER}")])
        data = raw_h2(limits.hostport,
                      PREFACE + h2_frame(4, 0, 0, struct.pack(">HI", 4, 0)) +
                      h2_frame(1, 4, 1, headers) + h2_frame(0, 0, 1, messages))
        resets = [int.from_bytes(p, "big") for kind, _, stream, p in frames_of(data)
                  if kind == 3 and stream == 1]
        self.assertEqual(resets, [8])  # RST_STREAM CANCEL
        self.assertEqual(calls_of(limits, path) - before, 1)
        self.assertIn("its client did not take an answer within 2 s", limits.log())

    def test_max_concurrent_streams_and_header_list_size_are_advertised(self):
        # A preface and nothing more: the server's SETTINGS, then GOAWAY when no stream opens
        # within --http-header-timeout, and the connection closes.
        data = raw_h2(limits.hostport, PREFACE + bytes(9)[:3] + b"\x04" + bytes(5))
        s = settings_of(data)
        self.assertEqual(s.get(3), 32)        # SETTINGS_MAX_CONCURRENT_STREAMS
        self.assertEqual(s.get(6), 65536)     # SETTINGS_MAX_HEADER_LIST_SIZE
        self.assertIn(b"\x07", data[9:])      # a GOAWAY frame (type 7) before the close

    def test_a_connection_that_shows_no_first_bytes_is_closed(self):
        self.assertEqual(raw_h2(limits.hostport, b""), b"")
        self.assertIn("its first bytes did not arrive within 1 s", limits.log())

    def test_a_message_that_does_not_arrive_within_the_body_deadline_is_refused(self):
        done = threading.Event()

        def trickle():
            yield health_pb2.HealthCheckRequest()
            done.wait(20)  # the stream stays open past --http-body-timeout (2 s)

        check = self.channel.stream_unary(
            "/grpc.health.v1.Health/Check",
            request_serializer=health_pb2.HealthCheckRequest.SerializeToString,
            response_deserializer=health_pb2.HealthCheckResponse.FromString)
        try:
            with self.assertRaises(grpc.RpcError) as cm:
                check(trickle(), timeout=15)
        finally:
            done.set()
        self.assertEqual((cm.exception.code(), cm.exception.details()),
                         (grpc.StatusCode.DEADLINE_EXCEEDED,
                          "the request's messages did not arrive within 2 s"))


class CapTest(unittest.TestCase):
    """--http-max-connections counts HTTP/2 and HTTP/1.1 connections alike."""

    @classmethod
    def setUpClass(cls):
        cls.d = Charterd("cap", "--http-max-connections", "2")

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()

    def h2(self):
        s = socket.create_connection(("127.0.0.1", self.d.port), timeout=10)
        s.sendall(PREFACE + b"\x00\x00\x00\x04\x00\x00\x00\x00\x00")  # an empty SETTINGS
        self.assertEqual(s.recv(9)[3], 4)  # the server's SETTINGS: served as HTTP/2
        return s

    def test_http1_waits_while_http2_connections_hold_the_cap(self):
        a, b = self.h2(), self.h2()
        c = socket.create_connection(("127.0.0.1", self.d.port), timeout=10)
        try:
            c.sendall(f"GET /healthz HTTP/1.1\r\nHost: {self.d.hostport}\r\n"
                      "Connection: close\r\n\r\n".encode())
            # Held in the listen backlog, unread, while a and b are open.
            self.assertEqual(select.select([c], [], [], 1.0)[0], [])
            a.close()
            c.settimeout(10)
            answer = b""
            while not answer.endswith(b"}"):
                chunk = c.recv(4096)
                if not chunk:
                    break
                answer += chunk
            self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer[:40])
            self.assertTrue(answer.endswith(b'{"status":"serving"}'), answer[-40:])
        finally:
            for s in (a, b, c):
                s.close()


def make_certificate(folder):
    crt, key = os.path.join(folder, "tls.crt"), os.path.join(folder, "tls.key")
    subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                    "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2", "-subj",
                    "/CN=localhost", "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1",
                    "-keyout", key, "-out", crt], check=True, capture_output=True)
    os.chmod(key, 0o600)
    return crt, key


class TlsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.certs = tempfile.mkdtemp(prefix="charter-grpc-tls-")
        cls.crt, key = make_certificate(cls.certs)
        cls.d = Charterd("tls", "--http-cert", cls.crt, "--http-key", key, scheme="https",
                         cafile=cls.crt)

    @classmethod
    def tearDownClass(cls):
        cls.d.stop()
        shutil.rmtree(cls.certs, ignore_errors=True)

    def test_grpc_over_tls_with_alpn_h2(self):
        with open(self.crt, "rb") as f:
            creds = grpc.ssl_channel_credentials(root_certificates=f.read())
        with grpc.secure_channel(f"localhost:{self.d.port}", creds) as ch:
            api = Api(ch)
            self.assertEqual(api.check(health_pb2.HealthCheckRequest(), timeout=10).status,
                             health_pb2.HealthCheckResponse.SERVING)
            run = api.create_run(charter_pb2.CreateRunRequest(mode="external"),
                                 metadata=auth(), timeout=10).run
            self.assertEqual(run.status, "created")

    def test_http1_over_tls_reaches_connect_and_the_probes(self):
        ctx = ssl.create_default_context(cafile=self.crt)
        with urllib.request.urlopen(f"https://localhost:{self.d.port}/healthz", timeout=10,
                                    context=ctx) as r:
            self.assertEqual(json.loads(r.read()), {"status": "serving"})
        status, body = connect(f"https://localhost:{self.d.port}", "/charter.v1.Runs/CreateRun",
                               {"mode": "external"}, context=ctx)
        self.assertEqual((status, body["run"]["status"]), (200, "created"))

    def alpn(self, offered):
        ctx = ssl.create_default_context(cafile=self.crt)
        ctx.set_alpn_protocols(offered)
        raw = socket.create_connection(("127.0.0.1", self.d.port), timeout=10)
        return ctx.wrap_socket(raw, server_hostname="localhost")

    def test_alpn_gives_http1_to_whoever_offers_it_and_h2_to_grpc_clients(self):
        # A browser or curl offers both: HTTP/1.1, which serves the console and Connect.
        with self.alpn(["h2", "http/1.1"]) as s:
            self.assertEqual(s.selected_alpn_protocol(), "http/1.1")
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            answer = b""
            while chunk := s.recv(4096):
                answer += chunk
        self.assertTrue(answer.startswith(b"HTTP/1.1 200"), answer[:40])
        self.assertTrue(answer.endswith(b'{"status":"serving"}'), answer[-40:])
        # A gRPC client offers HTTP/2 alone.
        with self.alpn(["h2"]) as s:
            self.assertEqual(s.selected_alpn_protocol(), "h2")

    def test_a_key_of_another_certificate_stops_startup_with_one_line(self):
        _, other_key = make_certificate(tempfile.mkdtemp(dir=self.certs))
        env = dict(os.environ, CHARTER_OPERATOR_TOKEN=OPERATOR)
        r = subprocess.run([os.environ["CHARTERD"], "--graph", "grpc_badkey", "--http",
                            "127.0.0.1:0", "--listen", f"ipc://{self.certs}/b.sock",
                            "--data-dir", f"{self.certs}/data", "--http-cert", self.crt,
                            "--http-key", other_key],
                           env=env, capture_output=True, text=True, timeout=60)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stderr.strip().splitlines()[-1],
                         f"charterd: --http-key: cannot use {other_key}: key values mismatch "
                         "(give the unencrypted PEM key the certificate of --http-cert was "
                         "made for)")

    def test_a_cleartext_client_is_not_served_on_a_tls_port(self):
        with grpc.insecure_channel(self.d.hostport) as ch:
            with self.assertRaises(grpc.RpcError) as cm:
                Api(ch).check(health_pb2.HealthCheckRequest(), timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)


if __name__ == "__main__":
    unittest.main()
