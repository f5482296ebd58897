// client.test.mjs - the TypeScript client (clients/typescript) against a real charterd over HTTP.
//
// Run by tests/typescript/run.sh in a consumer folder the packed tarball was installed into
// offline: 'charter-client' below is that installed package, not the source tree. charterd is
// started with --http on a free loopback port, an integrity key of its own and a graph of its
// own on the test Redis (CHARTER_TEST_REDIS; an embedded database without it). Every verdict
// is stated by hand from the reference procurement workflow (README, "The reference
// workflow"): the scripted adversary's handoff to the Reporter is refused INPUT_OUT_OF_SCOPE
// with the budget's path as witness, the Analyst's delivery to the CFO is allowed, and its
// receipt verifies under the key.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  Code, ConnectError, DecisionRefused, Outcome, ReceiptInvalid, createCharterClient,
  file_charter, receiptText, requireAllowed, services, verdict, verifyReceipt,
} from 'charter-client';
import { OPERATOR, VIEWER, startCharterd } from './charterd.mjs';

const HANDOFF_WITNESS =
  'budget (confidential) → Internal recommendation → report step {vendor_a, vendor_b, vendor_c}';
const here = path.dirname(fileURLToPath(import.meta.url));

let d, key, keyDir;
let op, viewer;

before(async () => {
  // A key file as an operator makes one: 64 hex digits and a newline, mode 0600.
  keyDir = fs.mkdtempSync(path.join(os.tmpdir(), 'charter-ts-key-'));
  key = Buffer.from(`${randomBytes(32).toString('hex')}\n`);
  const keyPath = path.join(keyDir, 'integrity.key');
  fs.writeFileSync(keyPath, key, { mode: 0o600, flag: 'wx' });
  d = await startCharterd({ name: 'ts_client', extra: ['--integrity-key', keyPath] });
  op = createCharterClient({ baseUrl: d.base, token: OPERATOR, timeoutMs: 10000 });
  viewer = createCharterClient({ baseUrl: d.base, token: VIEWER, timeoutMs: 10000 });
});

after(async () => {
  await d?.stop();
  if (keyDir) fs.rmSync(keyDir, { recursive: true, force: true });
});

async function refusal(promise) {
  try {
    await promise;
  } catch (e) {
    assert.ok(e instanceof ConnectError, `not a ConnectError: ${e}`);
    return e;
  }
  assert.fail('the call succeeded');
}

test('the tarball holds the compiled package only, and it is what is imported', () => {
  const tgz = process.env.CHARTER_TS_TARBALL;
  const listed = spawnSync('tar', ['-tzf', tgz], { encoding: 'utf8' });
  assert.equal(listed.status, 0, listed.stderr);
  assert.deepEqual(listed.stdout.split('\n').filter(Boolean).sort(), [
    'package/README.md',
    'package/dist/client.d.ts', 'package/dist/client.js',
    'package/dist/decision.d.ts', 'package/dist/decision.js',
    'package/dist/gen/charter_pb.d.ts', 'package/dist/gen/charter_pb.js',
    'package/dist/index.d.ts', 'package/dist/index.js',
    'package/dist/receipt.d.ts', 'package/dist/receipt.js',
    'package/package.json',
  ]);
  const resolved = fileURLToPath(import.meta.resolve('charter-client'));
  assert.equal(resolved, path.join(here, 'node_modules', 'charter-client', 'dist', 'index.js'));
});

test('the package\'s types check a consumer\'s code strictly (tsc --noEmit on consumer.ts)', () => {
  // consumer.ts holds typed calls and @ts-expect-error lines: types that collapsed to any
  // would leave those unused, and tsc would fail.
  const tsc = spawnSync(path.join(here, 'node_modules', '.bin', 'tsc'), ['-p', here], {
    encoding: 'utf8',
  });
  assert.equal(tsc.status, 0, `${tsc.stdout}${tsc.stderr}`);
});

test('the client has every service and method of the proto, the ones charterd serves', async () => {
  // The proto's text, read apart from the descriptors the client is made from.
  const text = fs.readFileSync(path.join(process.env.CHARTER_SOURCE_DIR, 'proto', 'charter.proto'), 'utf8');
  const declared = new Set();
  for (const [, service, body] of text.matchAll(/^service (\w+) \{([\s\S]*?)^\}/gm)) {
    for (const [, method] of body.matchAll(/^\s*rpc (\w+)\(/gm)) declared.add(`/charter.v1.${service}/${method}`);
  }
  assert.equal(declared.size, 47);
  const onClient = new Map();
  for (const [name, service] of Object.entries(services)) {
    assert.equal(name, service.name[0].toLowerCase() + service.name.slice(1));
    for (const m of service.methods) {
      assert.equal(typeof op[name][m.localName], 'function', `${name}.${m.localName}`);
      onClient.set(`/${service.typeName}/${m.name}`, [m.input.typeName, m.output.typeName]);
    }
  }
  assert.deepEqual(new Set(onClient.keys()), declared);
  assert.deepEqual(Object.keys(services).length, file_charter.services.length);
  // What charterd's dispatch table serves of charter.v1, with the same message types.
  const served = (await viewer.reflection.listMethods({})).methods
    .filter((m) => m.name.startsWith('/charter.v1.'))
    .map((m) => [m.name, m.requestType, m.responseType])
    .sort();
  assert.deepEqual(served, [...onClient].map(([k, [i, o]]) => [k, i, o]).sort());
});

test('health answers without a token, and the token and tenant travel as headers', async () => {
  const h = await createCharterClient({ baseUrl: d.base }).health.check({});
  assert.deepEqual([h.status, h.database, h.graph, h.role], ['serving', 'up', d.graph, '']);
  assert.equal((await op.health.check({})).role, 'operator');
  assert.equal((await viewer.health.check({})).role, 'viewer');
  // A call's own Authorization header is kept over the client's token.
  const asViewer = { headers: { Authorization: `Bearer ${VIEWER}` } };
  assert.equal((await op.health.check({}, asViewer)).role, 'viewer');
  const own = createCharterClient({ baseUrl: d.base, token: OPERATOR, tenant: d.graph });
  assert.equal((await own.health.check({})).tenant, d.graph);
  const other = `ts_other_${process.pid}`;
  const e = await refusal(createCharterClient({ baseUrl: d.base, token: OPERATOR, tenant: other })
    .runs.listRuns({}));
  assert.equal(e.code, Code.NotFound);
  assert.equal(e.rawMessage, `tenant ${other} not found`);
});

test('the scripted run is blocked at the refused handoff, with its witness, after one delivery', async () => {
  const view = await op.runs.createRun({ mode: 'scripted' });
  assert.equal(view.run.mode, 'scripted');
  assert.equal(view.run.status, 'blocked');
  const full = await viewer.runs.getRun({ runId: view.run.id });
  const denied = full.events.filter((e) => e.kind === 'input_checked' && e.outcome === Outcome.DENY);
  assert.equal(denied.length, 1);
  const v = verdict(denied[0]);
  assert.equal(v.outcome, 'DENY');
  assert.deepEqual(v.codes, ['INPUT_OUT_OF_SCOPE']);
  assert.equal(v.witness, HANDOFF_WITNESS);
  assert.equal(v.allowed, false);
  assert.equal(String(v), `DENY INPUT_OUT_OF_SCOPE: ${HANDOFF_WITNESS}`);
  assert.throws(() => requireAllowed(denied[0]),
    (e) => e instanceof DecisionRefused && e.verdict.witness === HANDOFF_WITNESS);
  // The one delivery: the Analyst's recommendation to the CFO, allowed.
  const decided = full.events.filter((e) => e.kind === 'delivery_decided').map((e) => String(verdict(e)));
  assert.deepEqual(decided, ['ALLOW']);
  assert.deepEqual(full.deliveries.map((x) => [x.invocationId, x.recipient, x.tool, x.grantChain]),
    [[`${view.run.id}:analyze:deliver`, 'cfo', 'deliver_internal', ['g_analyst', 'g_root']]]);
});

test('the receipts of the scripted run verify offline under the key, altered ones do not', async () => {
  const run = (await op.runs.createRun({ mode: 'scripted' })).run;
  assert.equal(run.status, 'blocked');
  const inv = `${run.id}:analyze:deliver`;
  const r = await viewer.evidence.getReceipt({ runId: run.id, invocationId: inv });
  assert.deepEqual([r.kind, r.runId, r.invocationId, r.recipient, r.tool, r.grantChain],
    ['delivery', run.id, inv, 'cfo', 'deliver_internal', ['g_analyst', 'g_root']]);
  assert.equal(verifyReceipt(r, key), undefined);
  assert.ok(receiptText(r).startsWith(`format=charter-receipt-1\nkind=delivery\nrun_id=${run.id}\n`
    + `invocation_id=${inv}\npayload_hash=${r.payloadHash}\nrecipient=cfo\n`));
  // The receipt document in the snake_case form older `charter --json receipt` printed verifies
  // as well (today it prints the lowerCamelCase mapping, as HTTP/JSON does).
  const doc = {
    kind: r.kind, run_id: r.runId, invocation_id: r.invocationId, payload_hash: r.payloadHash,
    recipient: r.recipient, tool: r.tool, grant_chain: r.grantChain, time: r.time,
    evaluator: r.evaluator, mac: r.mac,
  };
  assert.equal(verifyReceipt(doc, key), undefined);
  // One changed field, another key, a field the mac does not cover, an unknown field.
  const invalid = (reason) => (e) => e instanceof ReceiptInvalid && reason.test(e.reason);
  assert.throws(() => verifyReceipt({ ...r, recipient: 'public' }, key), invalid(/mac does not match/));
  assert.throws(() => verifyReceipt({ ...doc, grant_chain: ['g_root'] }, key), invalid(/mac does not match/));
  assert.throws(() => verifyReceipt(r, key.subarray(0, key.length - 1)), invalid(/mac does not match/));
  assert.throws(() => verifyReceipt({ ...doc, status: 'blocked' }, key), invalid(/not part of a delivery/));
  assert.throws(() => verifyReceipt({ ...doc, extra: 'x' }, key), invalid(/not a receipt/));
  assert.throws(() => verifyReceipt({ ...doc, mac: r.mac.toUpperCase() }, key), invalid(/64 lowercase hex/));
  // The run's own receipt: blocked, naming its one delivery.
  const rr = await viewer.evidence.getReceipt({ runId: run.id });
  assert.deepEqual([rr.kind, rr.status, rr.deliveries], ['run', 'blocked', [inv]]);
  assert.equal(verifyReceipt(rr, key), undefined);
});

test('an external run driven by hand delivers to the CFO and is refused the handoff', async () => {
  const run = (await op.runs.createRun({ mode: 'external' })).run;
  assert.equal(run.status, 'created');
  const ctx = await op.gate.openStep({ runId: run.id, step: 'analyze' });
  assert.equal(ctx.actor, 'analyst');
  const src = await op.gate.readSource({ contextId: ctx.contextId, resourceId: 'budget' });
  assert.equal(String(verdict(src)), 'ALLOW');
  const out = await op.gate.recordOutput({ contextId: ctx.contextId, inputIds: [src.artifact.id],
    title: 'Internal recommendation', content: 'Brightline.' });
  assert.equal(out.artifact.conf, 2); // confidential: the maximum of its inputs'
  const inv = `${run.id}:cfo`;
  const sent = await op.gate.deliver({ contextId: ctx.contextId, payloadId: out.artifact.id,
    recipient: 'cfo', tool: 'deliver_internal', invocationId: inv });
  assert.equal(requireAllowed(sent).outcome, 'ALLOW');
  assert.deepEqual([sent.delivery.invocationId, sent.acknowledged], [inv, false]);
  assert.equal(verifyReceipt(await viewer.evidence.getReceipt({ runId: run.id, invocationId: inv }), key),
    undefined);
  // The recommendation handed to the report step: refused, and not an exception.
  const report = await op.gate.openStep({ runId: run.id, step: 'report' });
  const checked = await op.gate.checkInput({ contextId: report.contextId, artifactIds: [out.artifact.id] });
  const v = verdict(checked);
  assert.deepEqual([v.outcome, [...v.codes], v.witness], ['DENY', ['INPUT_OUT_OF_SCOPE'], HANDOFF_WITNESS]);
  // The Analyst sending it to the public: confidential content above the public's clearance,
  // to a recipient outside the analyze step; no delivery.
  const leak = await op.gate.deliver({ contextId: ctx.contextId, payloadId: out.artifact.id,
    recipient: 'public', tool: 'deliver_internal', invocationId: `${run.id}:public` });
  assert.equal(String(verdict(leak)),
    'DENY CLEARANCE_EXCEEDED,STEP_MISMATCH: recipient public outside the analyze step {cfo}');
  assert.equal(leak.delivery, undefined);
  // A response without a decision reads OUTCOME_UNSPECIFIED, which is not allowed.
  assert.equal(verdict({ decision: undefined }).allowed, false);
});

test('refusals are ConnectErrors with the Connect code', async () => {
  let e = await refusal(op.runs.getRun({ runId: 'r0000000000000000' }));
  assert.equal(e.code, Code.NotFound);
  assert.match(e.rawMessage, /r0000000000000000/);
  e = await refusal(createCharterClient({ baseUrl: d.base }).runs.listRuns({}));
  assert.equal(e.code, Code.Unauthenticated);
  e = await refusal(createCharterClient({ baseUrl: d.base, token: 'not-a-token-of-this-server-at-all' })
    .runs.listRuns({}));
  assert.equal(e.code, Code.Unauthenticated);
  e = await refusal(viewer.grants.revokeGrant({ grantId: 'g_reporter' }));
  assert.equal(e.code, Code.PermissionDenied);
  e = await refusal(op.runs.createRun({ mode: 'sideways' }));
  assert.equal(e.code, Code.InvalidArgument);
  assert.match(e.rawMessage, /not scripted, live or external/);
  // Nothing listening: unavailable (port 1 of loopback: nothing here serves tcpmux).
  e = await refusal(createCharterClient({ baseUrl: 'http://127.0.0.1:1' })
    .health.check({}));
  assert.equal(e.code, Code.Unavailable);
});

test('timeoutMs is sent as Connect-Timeout-Ms and ends a call nobody answers', async () => {
  // A server that accepts and reads the request but never answers; it keeps the headers.
  const seen = [];
  const mute = net.createServer((sock) => {
    let head = '';
    sock.on('data', (b) => {
      head += b.toString('latin1');
      if (head.includes('\r\n\r\n')) seen.push(head.slice(0, head.indexOf('\r\n\r\n')));
    });
    sock.on('error', () => {});
  });
  await new Promise((r) => mute.listen(0, '127.0.0.1', r));
  try {
    const c = createCharterClient({ baseUrl: `http://127.0.0.1:${mute.address().port}`,
      token: 'tok-1', tenant: 'acme', timeoutMs: 300 });
    const e = await refusal(c.health.check({}));
    assert.equal(e.code, Code.DeadlineExceeded);
    assert.equal(seen.length, 1);
    const headers = Object.fromEntries(seen[0].split('\r\n').slice(1)
      .map((l) => [l.slice(0, l.indexOf(':')).toLowerCase(), l.slice(l.indexOf(':') + 1).trim()]));
    assert.match(seen[0], /^POST \/charter\.v1\.Health\/Check HTTP\/1\.1$/m);
    assert.equal(headers['content-type'], 'application/json');
    assert.equal(headers.authorization, 'Bearer tok-1');
    assert.equal(headers['charter-tenant'], 'acme');
    assert.equal(headers['connect-timeout-ms'], '300');
  } finally {
    mute.close();
  }
});

test('options that cannot make a client are refused before any call', () => {
  assert.throws(() => createCharterClient({ baseUrl: 'not a url' }), TypeError);
  assert.throws(() => createCharterClient({ baseUrl: 'ftp://127.0.0.1/' }), TypeError);
  assert.throws(() => createCharterClient({ baseUrl: d.base, token: 'a\r\nX-Evil: 1' }), TypeError);
  assert.throws(() => createCharterClient({ baseUrl: d.base, tenant: '' }), TypeError);
  assert.throws(() => createCharterClient({ baseUrl: d.base, timeoutMs: 0 }), TypeError);
  assert.throws(() => createCharterClient({ baseUrl: d.base, timeoutMs: 1.5 }), TypeError);
  assert.throws(() => verifyReceipt({}, new Uint8Array(0)), TypeError);
});
