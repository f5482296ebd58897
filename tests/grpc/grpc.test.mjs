// grpc.test.mjs - charterd's gRPC over HTTP/2 with the stock Node client, @grpc/grpc-js, the API
// loaded from proto/ by @grpc/proto-loader (versions pinned in package.json and its lock; run by
// tests/grpc/run.sh js). A real charterd on the test Redis. Verdicts are stated by hand from the
// reference procurement workflow: the delivery to the CFO is allowed, the budget memo handed to
// the report step refused INPUT_OUT_OF_SCOPE with the budget's path as witness.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import path from 'node:path';
import { createRequire } from 'node:module';
import grpc from '@grpc/grpc-js';
import protoLoader from '@grpc/proto-loader';
import { startCharterd, OPERATOR, VIEWER } from '../connect/charterd.mjs';

const require = createRequire(import.meta.url);
const descriptor = require('protobufjs/ext/descriptor');

const PROTO = path.join(process.env.CHARTER_SOURCE_DIR, 'proto');
const LOADER = { keepCase: true, longs: String, enums: String, defaults: true, oneofs: true };
const api = grpc.loadPackageDefinition(protoLoader.loadSync(
  ['charter.proto', 'health.proto', 'reflection.proto'], { ...LOADER, includeDirs: [PROTO] }));
const WITNESS = 'budget (confidential) → Internal recommendation → report step {vendor_a, vendor_b, vendor_c}';

const auth = (token = OPERATOR) => {
  const md = new grpc.Metadata();
  md.set('authorization', `Bearer ${token}`);
  return md;
};

// A unary call as a promise: resolves with the response, rejects with the grpc-js error.
const call = (client, method, req, md = auth()) => new Promise((resolve, reject) => {
  client[method](req, md, { deadline: Date.now() + 10000 }, (err, res) => (err ? reject(err) : resolve(res)));
});

let d;
const clients = {};
before(async () => {
  d = await startCharterd({ name: 'grpcjs' });
  const creds = grpc.credentials.createInsecure();
  clients.health = new api.grpc.health.v1.Health(d.hostport, creds);
  clients.runs = new api.charter.v1.Runs(d.hostport, creds);
  clients.gate = new api.charter.v1.Gate(d.hostport, creds);
  clients.reflection = new api.grpc.reflection.v1.ServerReflection(d.hostport, creds);
});
after(async () => {
  for (const c of Object.values(clients)) c.close();
  await d?.stop();
});

describe('grpc-js against charterd', () => {
  test('grpc.health.v1 Check answers SERVING without a token', async () => {
    const r = await call(clients.health, 'Check', { service: '' }, new grpc.Metadata());
    assert.equal(r.status, 'SERVING');
  });

  test('a run delivers to the CFO and the handoff is refused with its witness', async () => {
    const { run } = await call(clients.runs, 'CreateRun', { mode: 'external' });
    assert.equal(run.status, 'created');
    const ctx = await call(clients.gate, 'OpenStep', { run_id: run.id, step: 'analyze' });
    const src = await call(clients.gate, 'ReadSource', { context_id: ctx.context_id, resource_id: 'budget' });
    assert.equal(src.decision.outcome, 'ALLOW');
    const out = await call(clients.gate, 'RecordOutput', {
      context_id: ctx.context_id, input_ids: [src.artifact.id], title: 'Internal recommendation', content: 'Brightline.',
    });
    const sent = await call(clients.gate, 'Deliver', {
      context_id: ctx.context_id, payload_id: out.artifact.id, recipient: 'cfo', tool: 'deliver_internal',
      invocation_id: `${run.id}:cfo`,
    });
    assert.equal(sent.decision.outcome, 'ALLOW');
    assert.equal(sent.delivery.invocation_id, `${run.id}:cfo`);
    const report = await call(clients.gate, 'OpenStep', { run_id: run.id, step: 'report' });
    const checked = await call(clients.gate, 'CheckInput', { context_id: report.context_id, artifact_ids: [out.artifact.id] });
    assert.deepEqual([checked.decision.outcome, checked.decision.codes, checked.decision.witness],
      ['DENY', ['INPUT_OUT_OF_SCOPE'], WITNESS]);
  });

  test('refusals are grpc-js errors with the gRPC status code', async () => {
    await assert.rejects(call(clients.runs, 'ListRuns', {}, new grpc.Metadata()),
      (e) => e.code === grpc.status.UNAUTHENTICATED && /authorization: Bearer <token>/.test(e.details));
    await assert.rejects(call(clients.runs, 'GetRun', { run_id: 'r0000000000000000' }),
      (e) => e.code === grpc.status.NOT_FOUND && /r0000000000000000/.test(e.details));
    await assert.rejects(call(clients.runs, 'CreateRun', { mode: 'external' }, auth(VIEWER)),
      (e) => e.code === grpc.status.PERMISSION_DENIED);
  });

  test('server reflection lists the services and gives descriptors a client can be built from', async () => {
    const stream = clients.reflection.ServerReflectionInfo(auth(VIEWER), { deadline: Date.now() + 10000 });
    const answers = [];
    const ended = new Promise((resolve, reject) => {
      stream.on('data', (a) => answers.push(a));
      stream.on('end', resolve);
      stream.on('error', reject);
    });
    stream.write({ list_services: '' });
    stream.write({ file_containing_symbol: 'charter.v1.Runs' });
    stream.end();
    await ended;
    assert.equal(answers.length, 2);
    const names = answers[0].list_services_response.service.map((s) => s.name);
    for (const n of ['charter.v1.Runs', 'grpc.health.v1.Health', 'grpc.reflection.v1.ServerReflection']) {
      assert.ok(names.includes(n), n);
    }
    // The descriptors alone (no .proto file) make a client that calls the server.
    const files = answers[1].file_descriptor_response.file_descriptor_proto
      .map((b) => descriptor.FileDescriptorProto.decode(b));
    assert.deepEqual(files.map((f) => f.name), ['charter.proto']);
    const set = descriptor.FileDescriptorSet.encode({ file: files }).finish();
    const reflected = grpc.loadPackageDefinition(protoLoader.loadFileDescriptorSetFromBuffer(Buffer.from(set), LOADER));
    const runs = new reflected.charter.v1.Runs(d.hostport, grpc.credentials.createInsecure());
    try {
      const { run } = await call(runs, 'CreateRun', { mode: 'external' });
      assert.equal(run.status, 'created');
    } finally {
      runs.close();
    }
  });
});
