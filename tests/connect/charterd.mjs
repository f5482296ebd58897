// charterd.mjs - a real charterd for the node suites: started with --http on a free loopback
// port against the test Redis (CHARTER_TEST_REDIS from deploy/test.sh; an embedded database
// without it), with its own graph, stopped and its graph's keys deleted afterwards.
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

export const OPERATOR = 'node-operator-token-0123456789abcdef';
export const VIEWER = 'node-viewer-token-0123456789abcdefgh';

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// A bound on a wait that does not keep node running once the wait is over.
const bound = (ms) => new Promise((r) => setTimeout(r, ms).unref());

// The integrity key options of charterd: a suite that names none starts it keyless.
const KEY_OPTIONS = ['--integrity-key', '--no-integrity-key', '--adopt-integrity-key'];

// Starts charterd; redis overrides the database URL. Resolves once /healthz answers. charterd
// is keyless (--no-integrity-key) unless extra names a key option.
export async function startCharterd({ name, extra = [], redis } = {}) {
  const bin = process.env.CHARTERD;
  if (!bin) throw new Error('CHARTERD is not set (run through tests/connect/run.sh)');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'charter-node-'));
  const graph = `node_${name}_${process.pid}`;
  const db = redis ?? process.env.CHARTER_TEST_REDIS;
  // Port 0: the system picks the port as charterd binds it, and charterd logs which.
  const args = ['--graph', graph, '--listen', `ipc://${dir}/c.sock`, '--http', '127.0.0.1:0', ...extra];
  if (!extra.some((a) => KEY_OPTIONS.includes(a))) args.push('--no-integrity-key');
  if (db) args.push('--redis', db);
  else args.push('--data-dir', path.join(dir, 'data'));
  const log = fs.openSync(path.join(dir, 'charterd.log'), 'a');
  const child = spawn(bin, args, {
    env: { ...process.env, CHARTER_OPERATOR_TOKEN: OPERATOR, CHARTER_VIEWER_TOKEN: VIEWER },
    stdio: ['ignore', log, log],
  });
  let exited = null;
  child.on('exit', (code, sig) => { exited = { code, sig }; });
  const logPath = path.join(dir, 'charterd.log');
  let hostport = null;
  let base = null;
  const deadline = Date.now() + 20000;
  for (;;) {
    if (exited) break;
    const m = hostport ? null : /serving HTTP\/JSON and gRPC on http:\/\/([^/\s",]+)/.exec(fs.readFileSync(logPath, 'utf8'));
    if (m) {
      hostport = m[1];
      base = `http://${hostport}`;
    }
    try {
      const r = base && await fetch(`${base}/healthz`);
      if (r && r.status === 200) break;
    } catch (e) { /* not listening yet */ }
    if (Date.now() > deadline) break;
    await sleep(100);
  }
  if (exited || Date.now() > deadline) {
    process.stderr.write(fs.readFileSync(path.join(dir, 'charterd.log'), 'utf8'));
    child.kill('SIGKILL');
    throw new Error(`charterd did not start (${JSON.stringify(exited)})`);
  }
  return {
    base, graph, dir, hostport,
    logText: () => fs.readFileSync(path.join(dir, 'charterd.log'), 'utf8'),
    async stop() {
      if (!exited) {
        const done = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([done, bound(30000)]);
        if (!exited) child.kill('SIGKILL');
      }
      if (db) dropGraph(db, graph);
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

// redis-cli arguments reaching the database at url (unix:///path or tcp://host:port).
export function redisCliArgs(url) {
  if (url.startsWith('unix://')) return ['-s', url.slice('unix://'.length)];
  const m = /^tcp:\/\/([^:]+):(\d+)/.exec(url);
  return m ? ['-h', m[1], '-p', m[2]] : [];
}

function dropGraph(url, graph) {
  const cli = redisCliArgs(url);
  const keys = spawnSync('redis-cli', [...cli, '--scan', '--pattern', `*{${graph}}*`], { encoding: 'utf8' })
    .stdout.split('\n').filter(Boolean);
  for (let i = 0; i < keys.length; i += 500) {
    spawnSync('redis-cli', [...cli, 'DEL', ...keys.slice(i, i + 500)]);
  }
}

// POST a Connect unary call with JSON; returns { status, body } (body parsed when JSON).
export async function post(base, method, body, token) {
  const headers = { 'Content-Type': 'application/json' };
  if (token) headers.Authorization = `Bearer ${token}`;
  const r = await fetch(`${base}/charter.v1.${method}`, { method: 'POST', headers, body: JSON.stringify(body) });
  const text = await r.text();
  let j = null;
  try { j = JSON.parse(text); } catch (e) { j = text; }
  return { status: r.status, body: j };
}
