// connect.test.mjs - charterd's HTTP listener called by a real Connect client: @connectrpc/connect
// with the client generated from proto/charter.proto by protoc-gen-es and connect-node's stock
// transport, over HTTP/1.1 with JSON (Connect unary, bodies chunked). Each case states its verdict
// by hand: several methods succeed, an external run delivers through the gate, and refusals arrive
// as ConnectError with the right Code.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createClient, Code, ConnectError } from '@connectrpc/connect';
import { createConnectTransport } from '@connectrpc/connect-node';
import { Evidence, Gate, Grants, Health, Outcome, Runs } from './gen/charter_pb.js';
import { OPERATOR, VIEWER, startCharterd } from './charterd.mjs';

// connect-node's own transport, as a Node caller would use it: over HTTP/1.1 it streams each
// request body (Transfer-Encoding: chunked), which charterd reads as it arrives.
const transportOf = (baseUrl) =>
  createConnectTransport({ baseUrl, httpVersion: '1.1', useBinaryFormat: false });

let d;
let runs, gate, grants, health, evidence;
const as = (token) => ({ headers: { Authorization: `Bearer ${token}` } });

before(async () => {
  d = await startCharterd({ name: 'connect' });
  const transport = transportOf(d.base);
  runs = createClient(Runs, transport);
  gate = createClient(Gate, transport);
  grants = createClient(Grants, transport);
  health = createClient(Health, transport);
  evidence = createClient(Evidence, transport);
});

after(async () => { await d?.stop(); });

async function refusal(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ConnectError, `not a ConnectError: ${e}`);
    return e;
  }
  assert.fail('the call succeeded');
}

test('health check answers serving without a token and names the role of a token', async () => {
  const h = await health.check({});
  assert.equal(h.status, 'serving');
  assert.equal(h.database, 'up');
  assert.equal(h.graph, d.graph);
  assert.equal(h.role, '');
  assert.equal((await health.check({}, as(OPERATOR))).role, 'operator');
  assert.equal((await health.check({}, as(VIEWER))).role, 'viewer');
  assert.equal(h.scriptedOnly, false);
});

test('a run created by the operator is read back by the viewer and listed', async () => {
  const v = await runs.createRun({ mode: 'external', task: 'from a Connect client' }, as(OPERATOR));
  assert.match(v.run.id, /^r[0-9a-f]+$/);
  assert.equal(v.run.mode, 'external');
  assert.equal(v.run.status, 'created');
  const got = await runs.getRun({ runId: v.run.id }, as(VIEWER));
  assert.equal(got.run.task, 'from a Connect client');
  assert.equal(typeof got.run.seq, 'bigint'); // uint64 crossed as a JSON string
  assert.ok(got.run.seq >= 1n);
  assert.equal(got.events[0].kind, 'run_created');
  const list = await runs.listRuns({}, as(OPERATOR));
  assert.ok(list.runs.some((r) => r.id === v.run.id));
});

test('an external run delivers through the gate, a retry is acknowledged, a wrong recipient is denied', async () => {
  const v = await runs.createRun({ mode: 'external' }, as(OPERATOR));
  const ctx = await gate.openStep({ runId: v.run.id, step: 'analyze' }, as(OPERATOR));
  assert.equal(ctx.actor, 'analyst');
  const src = await gate.readSource({ contextId: ctx.contextId, resourceId: 'vendor_b' }, as(OPERATOR));
  assert.equal(src.decision.outcome, Outcome.ALLOW);
  const outp = await gate.recordOutput({ contextId: ctx.contextId, inputIds: [src.artifact.id],
    title: 'Pick', content: 'Brightline.' }, as(OPERATOR));
  const send = { contextId: ctx.contextId, payloadId: outp.artifact.id, recipient: 'cfo',
    tool: 'deliver_internal', invocationId: `connect-${process.pid}-1` };
  const r = await gate.deliver(send, as(OPERATOR));
  assert.equal(r.decision.outcome, Outcome.ALLOW);
  assert.equal(r.delivery.invocationId, send.invocationId);
  assert.deepEqual(r.delivery.grantChain, ['g_analyst', 'g_root']);
  assert.equal(r.acknowledged, false);
  const again = await gate.deliver(send, as(OPERATOR));
  assert.equal(again.acknowledged, true);
  const wrong = await gate.deliver({ ...send, recipient: 'public', invocationId: `connect-${process.pid}-2` }, as(OPERATOR));
  assert.equal(wrong.decision.outcome, Outcome.DENY);
  assert.ok(wrong.decision.codes.length > 0);
  const audit = await evidence.auditRun({ runId: v.run.id }, as(VIEWER));
  assert.equal(audit.intact, true);
});

test('refusals arrive as ConnectError with the Connect code', async () => {
  let e = await refusal(runs.getRun({ runId: 'r0000000000000000' }, as(OPERATOR)));
  assert.equal(e.code, Code.NotFound);
  e = await refusal(grants.revokeGrant({ grantId: 'g_reporter' }, as(VIEWER)));
  assert.equal(e.code, Code.PermissionDenied);
  e = await refusal(runs.listRuns({}));
  assert.equal(e.code, Code.Unauthenticated);
  e = await refusal(runs.listRuns({}, as('not-a-token-of-this-server-at-all')));
  assert.equal(e.code, Code.Unauthenticated);
  e = await refusal(runs.createRun({ mode: 'sideways' }, as(OPERATOR)));
  assert.equal(e.code, Code.InvalidArgument);
  assert.match(e.rawMessage, /not scripted, live or external/);
});

test('--scripted-only refuses live runs and grant controls but runs scripted ones', async () => {
  const demo = await startCharterd({ name: 'demo', extra: ['--scripted-only'] });
  try {
    const t = transportOf(demo.base);
    const h = await createClient(Health, t).check({}, as(OPERATOR));
    assert.equal(h.scriptedOnly, true);
    let e = await refusal(createClient(Runs, t).createRun({ mode: 'live' }, as(OPERATOR)));
    assert.equal(e.code, Code.PermissionDenied);
    e = await refusal(createClient(Grants, t).revokeGrant({ grantId: 'g_reporter' }, as(OPERATOR)));
    assert.equal(e.code, Code.PermissionDenied);
    e = await refusal(createClient(Grants, t).restoreGrants({ grantId: 'g_reporter' }, as(OPERATOR)));
    assert.equal(e.code, Code.PermissionDenied);
    const v = await createClient(Runs, t).createRun({ mode: 'scripted' }, as(OPERATOR));
    assert.equal(v.run.status, 'blocked');
  } finally {
    await demo.stop();
  }
});
