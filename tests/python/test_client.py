"""test_client.py - the Python client (clients/python) against a real charterd over HTTP.

Run by tests/python/run.sh with the interpreter of a fresh venv the wheel was installed into:
charterd is started here with --http on a free loopback port, an integrity key of its own and
a graph of its own on the test Redis (CHARTER_TEST_REDIS; an embedded database without it).
Every verdict below is stated by hand from the reference procurement workflow (README, "The
reference workflow"): the scripted adversary's handoff to the Reporter is refused
INPUT_OUT_OF_SCOPE with the budget's path as witness, the Analyst's delivery to the CFO is
allowed, and its receipt verifies under the key.
"""
import os
import re
import secrets
import socket
import sys
import tempfile
import unittest

import charter_client
import charterd_proc
from charter_client import Client, charter_pb2, verdict, verify_receipt

OPERATOR = "py-operator-" + secrets.token_hex(16)
VIEWER = "py-viewer-" + secrets.token_hex(16)
HANDOFF_WITNESS = ("budget (confidential) → Internal recommendation → "
                   "report step {vendor_a, vendor_b, vendor_c}")


class Charterd(charterd_proc.Charterd):
    """A real charterd with --http, started for this suite and stopped after it."""

    def __init__(self):
        folder = tempfile.mkdtemp(prefix="charter-py-")
        self.key = secrets.token_hex(32).encode() + b"\n"  # a key file's bytes, newline kept
        key_path = os.path.join(folder, "integrity.key")
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(self.key)
        redis = os.environ.get("CHARTER_TEST_REDIS")
        args = ["--listen", f"ipc://{folder}/c.sock", "--integrity-key", key_path]
        args += ["--redis", redis] if redis else ["--data-dir", f"{folder}/data"]
        env = dict(os.environ, CHARTER_OPERATOR_TOKEN=OPERATOR, CHARTER_VIEWER_TOKEN=VIEWER)
        super().__init__("", f"py_client_{os.getpid()}", args, env, data_dir=folder)


d = None


def setUpModule():
    global d
    d = Charterd()


def tearDownModule():
    if d is not None:
        d.stop()


class ClientTest(unittest.TestCase):
    def setUp(self):
        self.op = Client(d.base, token=OPERATOR, timeout=10)
        self.viewer = Client(d.base, token=VIEWER, timeout=10)

    def test_the_installed_wheel_is_what_is_tested(self):
        self.assertTrue(charter_client.__file__.startswith(sys.prefix), charter_client.__file__)
        self.assertNotEqual(sys.prefix, sys.base_prefix)  # a venv, not the system Python

    def test_every_rpc_of_the_proto_and_of_the_server_is_a_client_method(self):
        # The proto's text, read apart from the descriptors the client is made from.
        src = os.path.join(os.environ["CHARTER_SOURCE_DIR"], "proto", "charter.proto")
        with open(src, encoding="utf-8") as f:
            text = f.read()
        declared = set()
        for service, body in re.findall(r"^service (\w+) \{(.*?)^\}", text, re.M | re.S):
            for method in re.findall(r"^\s*rpc (\w+)\(", body, re.M):
                declared.add(f"/charter.v1.{service}/{method}")
        self.assertEqual(len(declared), 47)
        paths = {m.path for m in charter_client.METHODS.values()}
        self.assertEqual(paths, declared)
        self.assertEqual(charter_client.METHODS["create_run"].path, "/charter.v1.Runs/CreateRun")
        self.assertTrue(callable(Client.get_receipt) and callable(Client.check_input))
        # What charterd's dispatch table serves of charter.v1 (grpc.health.v1 is not in
        # charter.proto) is what the client calls, with the same message types.
        served = {(m.name, m.request_type, m.response_type)
                  for m in self.viewer.list_methods().methods if m.name.startswith("/charter.v1.")}
        self.assertEqual(served, {(m.path, m.input.DESCRIPTOR.full_name,
                                   m.output.DESCRIPTOR.full_name)
                                  for m in charter_client.METHODS.values()})

    def test_health_answers_without_a_token_and_names_the_role_of_one(self):
        h = Client(d.base).check()
        self.assertEqual((h.status, h.database, h.graph, h.role), ("serving", "up", d.graph, ""))
        self.assertEqual(self.op.check().role, "operator")
        self.assertEqual(self.viewer.check().role, "viewer")

    def test_scripted_run_is_blocked_at_the_refused_handoff_with_its_witness(self):
        view = self.op.create_run(mode="scripted")
        self.assertEqual(view.run.mode, "scripted")
        self.assertEqual(view.run.status, "blocked")
        full = self.viewer.get_run(run_id=view.run.id)
        inputs = [e for e in full.events if e.kind == "input_checked"]
        denied = [e for e in inputs if e.outcome == charter_pb2.DENY]
        self.assertEqual(len(denied), 1)
        v = verdict(denied[0])
        self.assertEqual(v.outcome, "DENY")
        self.assertEqual(v.codes, ("INPUT_OUT_OF_SCOPE",))
        self.assertEqual(v.witness, HANDOFF_WITNESS)
        self.assertFalse(v.allowed)
        self.assertEqual(str(v), "DENY INPUT_OUT_OF_SCOPE: " + HANDOFF_WITNESS)
        with self.assertRaises(charter_client.DecisionRefused) as cm:
            v.require_allowed()
        self.assertEqual(cm.exception.verdict, v)
        # The one delivery: the Analyst's recommendation to the CFO, allowed.
        decided = [verdict(e) for e in full.events if e.kind == "delivery_decided"]
        self.assertEqual([str(x) for x in decided], ["ALLOW"])
        self.assertEqual([(x.invocation_id, x.recipient, x.tool, list(x.grant_chain))
                          for x in full.deliveries],
                         [(f"{view.run.id}:analyze:deliver", "cfo", "deliver_internal",
                           ["g_analyst", "g_root"])])

    def test_receipts_of_the_scripted_run_verify_offline_under_the_key(self):
        run = self.op.create_run(mode="scripted").run
        self.assertEqual(run.status, "blocked")
        inv = f"{run.id}:analyze:deliver"
        r = self.viewer.get_receipt(run_id=run.id, invocation_id=inv)
        self.assertEqual((r.kind, r.run_id, r.invocation_id, r.recipient, r.tool),
                         ("delivery", run.id, inv, "cfo", "deliver_internal"))
        self.assertEqual(list(r.grant_chain), ["g_analyst", "g_root"])
        self.assertIsNone(verify_receipt(r, d.key))
        self.assertTrue(charter_client.receipt_text(r).startswith(
            b"format=charter-receipt-1\nkind=delivery\nrun_id=" + run.id.encode() + b"\n"))
        # The receipt document in the snake_case form older `charter --json receipt` printed
        # verifies as well (today it prints the lowerCamelCase mapping, as HTTP/JSON does).
        doc = {"kind": r.kind, "run_id": r.run_id, "invocation_id": r.invocation_id,
               "payload_hash": r.payload_hash, "recipient": r.recipient, "tool": r.tool,
               "grant_chain": list(r.grant_chain), "time": r.time, "evaluator": r.evaluator,
               "mac": r.mac}
        self.assertIsNone(verify_receipt(doc, d.key))
        # One changed field, another key, a field the mac does not cover: each refused.
        altered = charter_pb2.Receipt()
        altered.CopyFrom(r)
        altered.recipient = "public"
        with self.assertRaisesRegex(charter_client.ReceiptInvalid, "mac does not match"):
            verify_receipt(altered, d.key)
        with self.assertRaisesRegex(charter_client.ReceiptInvalid, "mac does not match"):
            verify_receipt(r, d.key[:-1])  # the key without its newline is another key
        with self.assertRaisesRegex(charter_client.ReceiptInvalid, "not part of a delivery"):
            verify_receipt(dict(doc, status="blocked"), d.key)
        with self.assertRaisesRegex(charter_client.ReceiptInvalid, "not a receipt"):
            verify_receipt(dict(doc, extra="x"), d.key)
        # The run's own receipt: blocked, naming its one delivery.
        rr = self.viewer.get_receipt(run_id=run.id)
        self.assertEqual((rr.kind, rr.status, list(rr.deliveries)), ("run", "blocked", [inv]))
        self.assertIsNone(verify_receipt(rr, d.key))

    def test_external_run_driven_by_hand_delivers_and_is_refused_the_handoff(self):
        run = self.op.create_run(charter_pb2.CreateRunRequest(mode="external")).run
        self.assertEqual(run.status, "created")
        ctx = self.op.open_step(run_id=run.id, step="analyze")
        self.assertEqual(ctx.actor, "analyst")
        src = self.op.read_source({"contextId": ctx.context_id, "resourceId": "budget"})
        self.assertEqual(str(verdict(src)), "ALLOW")
        out = self.op.record_output(context_id=ctx.context_id, input_ids=[src.artifact.id],
                                    title="Internal recommendation", content="Brightline.")
        self.assertEqual(out.artifact.conf, 2)  # confidential: the maximum of its inputs'
        inv = f"{run.id}:cfo"
        sent = self.op.deliver(context_id=ctx.context_id, payload_id=out.artifact.id,
                               recipient="cfo", tool="deliver_internal", invocation_id=inv)
        self.assertEqual(str(verdict(sent)), "ALLOW")
        self.assertEqual((sent.delivery.invocation_id, sent.acknowledged), (inv, False))
        self.assertIsNone(verify_receipt(
            self.viewer.get_receipt(run_id=run.id, invocation_id=inv), d.key))
        # The recommendation handed to the report step: refused, and not an exception.
        report = self.op.open_step(run_id=run.id, step="report")
        checked = self.op.check_input(context_id=report.context_id, artifact_ids=[out.artifact.id])
        v = verdict(checked)
        self.assertEqual((v.outcome, v.codes, v.witness),
                         ("DENY", ("INPUT_OUT_OF_SCOPE",), HANDOFF_WITNESS))
        # The Analyst sending it to the public: a recipient outside the analyze step.
        leak = self.op.deliver(context_id=ctx.context_id, payload_id=out.artifact.id,
                               recipient="public", tool="deliver_internal",
                               invocation_id=f"{run.id}:public")
        self.assertEqual(verdict(leak).outcome, "DENY")
        self.assertIn("STEP_MISMATCH", verdict(leak).codes)
        self.assertEqual(verdict(leak).witness, "recipient public outside the analyze step {cfo}")
        self.assertFalse(leak.HasField("delivery"))

    def test_refusals_are_typed_errors_with_the_connect_code_and_status_number(self):
        with self.assertRaises(charter_client.NotFound) as cm:
            self.op.get_run(run_id="r0000000000000000")
        e = cm.exception
        self.assertIsInstance(e, charter_client.CharterError)
        self.assertEqual((e.code, e.grpc_status, e.http_status), ("not_found", 5, 404))
        self.assertIn("r0000000000000000", e.message)
        with self.assertRaises(charter_client.PermissionDenied) as cm:
            self.viewer.revoke_grant(grant_id="g_reporter")
        self.assertEqual((cm.exception.code, cm.exception.grpc_status,
                          cm.exception.http_status), ("permission_denied", 7, 403))
        with self.assertRaises(charter_client.Unauthenticated) as cm:
            Client(d.base).list_runs()
        self.assertEqual((cm.exception.grpc_status, cm.exception.http_status), (16, 401))
        with self.assertRaises(charter_client.Unauthenticated):
            self.op.list_runs(token="not-a-token-of-this-server-at-all")
        with self.assertRaises(charter_client.InvalidArgument) as cm:
            self.op.create_run(mode="sideways")
        self.assertEqual((cm.exception.grpc_status, cm.exception.http_status), (3, 400))
        self.assertRegex(cm.exception.message, "not scripted, live or external")
        with self.assertRaises(ValueError):  # not in charter.proto: refused before sending
            self.op.call("/charter.v1.Nope/CreateRun")

    def test_the_tenant_travels_in_the_charter_tenant_header(self):
        self.assertEqual(self.op.check(tenant=d.graph).tenant, d.graph)
        with self.assertRaises(charter_client.InvalidArgument) as cm:
            self.op.check(tenant="a{b}")
        self.assertIn('tenant "a{b}"', cm.exception.message)
        other = Client(d.base, token=OPERATOR, tenant=f"py_other_{os.getpid()}")
        with self.assertRaises(charter_client.NotFound) as cm:
            other.list_runs()
        self.assertEqual(cm.exception.message, f"tenant py_other_{os.getpid()} not found")

    def test_a_call_deadline_bounds_the_server_wait_and_the_client_wait(self):
        # A scripted run of the procurement workflow with the CFO's approval on every send to
        # cfo rests in pending_approval: its executor waits for a human, nothing happens.
        path = os.path.join(os.environ["CHARTER_SOURCE_DIR"], "tests", "workflows",
                            "approval.json")
        with open(path, "rb") as f:
            self.assertEqual(self.op.apply_workflow(definition=f.read()).name,
                             "procurement_approval")
        # "async" is a Python keyword: the request as a dict in the JSON mapping.
        v = self.op.create_run({"mode": "scripted", "workflow": "procurement_approval",
                                "async": True})
        run_id = v.run.id
        for _ in range(100):  # each WaitRun answers on the run's next events
            if v.run.status not in ("queued", "running"):
                break
            v = self.viewer.wait_run(run_id=run_id, after_seq=v.run.seq, timeout_ms=5000)
        self.assertEqual(v.run.status, "pending_approval")
        # WaitRun waits up to its own timeout_ms, at most the call's deadline: with a deadline
        # of 0.5 s charterd answers the run unchanged (no event after after_seq). Without
        # Connect-Timeout-Ms it would wait its default 5 s and the client would give up first.
        w = self.viewer.wait_run(run_id=run_id, after_seq=v.run.seq, timeout_ms=60000,
                                 timeout=0.5)
        self.assertEqual((w.run.status, list(w.events)), ("pending_approval", []))
        self.op.cancel_run(run_id=run_id, reason="the deadline test is over")
        # A server that accepts and never answers: the client's own deadline ends the call.
        with socket.socket() as mute:
            mute.bind(("127.0.0.1", 0))
            mute.listen(1)
            port = mute.getsockname()[1]
            with self.assertRaises(charter_client.DeadlineExceeded) as cm:
                Client(f"http://127.0.0.1:{port}", timeout=0.2).check()
            self.assertEqual((cm.exception.grpc_status, cm.exception.http_status), (4, 0))
        # Nothing listening: unavailable (a port held bound, never listened on, refuses).
        with socket.socket() as closed:
            closed.bind(("127.0.0.1", 0))
            with self.assertRaises(charter_client.Unavailable):
                Client(f"http://127.0.0.1:{closed.getsockname()[1]}").check()
        with self.assertRaises(ValueError):
            self.op.check(timeout=0)


if __name__ == "__main__":
    unittest.main(verbosity=2)
