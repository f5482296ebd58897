// metrics.test.mjs - GET /metrics, /healthz and /readyz of a real charterd. The exposition is
// checked by a real parser (promtool check metrics, Debian's prometheus package) before and
// after real calls, and named counters are read to move by exactly what the calls did; /readyz
// follows a database that goes away and comes back without the query library (charterd loads
// it again) and one that holds a library of another version (charterd leaves it alone).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { OPERATOR, post, redisCliArgs, startCharterd } from './charterd.mjs';

let d;
before(async () => { d = await startCharterd({ name: 'metrics' }); });
after(async () => { await d?.stop(); });

async function scrape(base = d.base) {
  const r = await fetch(`${base}/metrics`);
  assert.equal(r.status, 200);
  assert.match(r.headers.get('content-type'), /^text\/plain; version=0\.0\.4/);
  return r.text();
}

function promtool(text) {
  const p = spawnSync('promtool', ['check', 'metrics'], { input: text, encoding: 'utf8' });
  assert.equal(p.error, undefined, 'promtool is missing (deploy/deps.sh installs prometheus)');
  return p;
}

// The value of one series (exact name and labels as exposed), 0 when absent.
function value(text, series) {
  for (const line of text.split('\n')) {
    if (line.startsWith(series + ' ')) return Number(line.slice(series.length + 1));
  }
  return 0;
}

test('the exposition passes promtool before any call', async () => {
  const p = promtool(await scrape());
  assert.equal(p.status, 0, p.stdout + p.stderr);
});

test('a scripted run moves calls, decisions, codes, latency and run statuses by what it did', async () => {
  const before = await scrape();
  const created = await post(d.base, 'Runs/CreateRun', { mode: 'scripted' }, OPERATOR);
  assert.equal(created.status, 200);
  assert.equal(created.body.run.status, 'blocked');
  const missing = await post(d.base, 'Runs/GetRun', { runId: 'r0000000000000000' }, OPERATOR);
  assert.equal(missing.status, 404);
  const noToken = await post(d.base, 'Runs/ListRuns', {}, null);
  assert.equal(noToken.status, 401);
  const after = await scrape();
  const moved = (s) => value(after, s) - value(before, s);
  assert.equal(moved('charter_calls_total{method="/charter.v1.Runs/CreateRun",code="OK"}'), 1);
  assert.equal(moved('charter_calls_total{method="/charter.v1.Runs/GetRun",code="NOT_FOUND"}'), 1);
  assert.equal(moved('charter_calls_total{method="/charter.v1.Runs/ListRuns",code="UNAUTHENTICATED"}'), 1);
  assert.equal(moved('charter_call_duration_seconds_count{method="/charter.v1.Runs/CreateRun"}'), 1);
  assert.equal(moved('charter_call_duration_seconds_bucket{method="/charter.v1.Runs/CreateRun",le="+Inf"}'), 1);
  assert.ok(moved('charter_call_duration_seconds_sum{method="/charter.v1.Runs/CreateRun"}') > 0);
  // The reference workflow: analyze's inputs allowed, its delivery to the CFO allowed, the
  // report step's input denied with INPUT_OUT_OF_SCOPE, the run blocked.
  assert.equal(moved('charter_decisions_total{gate="input",outcome="allow"}'), 1);
  assert.equal(moved('charter_decisions_total{gate="input",outcome="deny"}'), 1);
  assert.equal(moved('charter_decision_codes_total{gate="input",outcome="deny",code="INPUT_OUT_OF_SCOPE"}'), 1);
  assert.equal(moved('charter_decisions_total{gate="delivery",outcome="allow"}'), 1);
  assert.equal(moved('charter_decisions_total{gate="delivery",outcome="deny"}'), 0);
  assert.equal(moved('charter_run_status_changes_total{status="created"}'), 1);
  assert.equal(moved('charter_run_status_changes_total{status="queued"}'), 1);
  assert.equal(moved('charter_run_status_changes_total{status="running"}'), 1);
  assert.equal(moved('charter_run_status_changes_total{status="blocked"}'), 1);
  assert.equal(value(after, 'charter_queue_depth'), 0);
  assert.equal(value(after, 'charter_workers_busy'), 0);
  assert.ok(value(after, 'charter_workers') >= 1);
  const p = promtool(after);
  assert.equal(p.status, 0, p.stdout + p.stderr);
});

test('healthz and readyz answer 200 while the database is up', async () => {
  assert.equal((await fetch(`${d.base}/healthz`)).status, 200);
  const r = await fetch(`${d.base}/readyz`);
  assert.equal(r.status, 200);
  assert.deepEqual(await r.json(), { ready: true, database: 'up', queryLibrary: 'loaded' });
});

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function startRedis(dir) {
  const sock = path.join(dir, 'r.sock');
  const child = spawn('redis-server', ['--port', '0', '--unixsocket', sock, '--unixsocketperm', '700',
    '--dir', dir, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  for (let i = 0; i < 100; i++) {
    if (spawnSync('redis-cli', ['-s', sock, 'ping'], { encoding: 'utf8' }).stdout.trim() === 'PONG') break;
    await sleep(50);
  }
  return { child, url: `unix://${sock}` };
}

async function stopRedis(r) {
  const gone = new Promise((res) => r.child.once('exit', res));
  spawnSync('redis-cli', [...redisCliArgs(r.url), 'SHUTDOWN', 'NOSAVE']);
  await Promise.race([gone, new Promise((r) => setTimeout(r, 5000).unref())]);
}

test('readyz is 503 while the database is gone or holds another query library, 200 once it is back empty', async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'charter-readyz-'));
  let redis = await startRedis(dir);
  const own = await startCharterd({ name: 'readyz', redis: redis.url, extra: ['--workers', '1'] });
  try {
    assert.equal((await fetch(`${own.base}/readyz`)).status, 200);
    const before = await scrape(own.base);
    await stopRedis(redis);
    let r = await fetch(`${own.base}/readyz`);
    assert.equal(r.status, 503);
    assert.deepEqual(await r.json(), { ready: false, database: 'down', queryLibrary: 'unknown' });
    assert.equal((await fetch(`${own.base}/healthz`)).status, 200); // alive, not ready
    const down = await scrape(own.base);
    assert.ok(value(down, 'charter_db_errors_total') > value(before, 'charter_db_errors_total'));

    redis = await startRedis(dir); // a fresh server: reachable, no query library until charterd loads it
    const cli = redisCliArgs(redis.url);
    r = await fetch(`${own.base}/readyz`);
    assert.equal(r.status, 200);
    assert.deepEqual(await r.json(), { ready: true, database: 'up', queryLibrary: 'loaded' });
    const listed = spawnSync('redis-cli', [...cli, 'FUNCTION', 'LIST', 'LIBRARYNAME', 'charter'], { encoding: 'utf8' });
    assert.match(listed.stdout, /^charter$/m);

    // What a charterd of another build would load: left in place, so not ready.
    const other = "#!lua name=charter\nredis.register_function('charter_version', " +
      "function() return cjson.encode({version='0'}) end)\n";
    const loaded = spawnSync('redis-cli', [...cli, 'FUNCTION', 'LOAD', 'REPLACE', other], { encoding: 'utf8' });
    assert.equal(loaded.stdout.trim(), 'charter');
    r = await fetch(`${own.base}/readyz`);
    assert.equal(r.status, 503);
    assert.deepEqual(await r.json(), { ready: false, database: 'up', queryLibrary: 'missing' });
    const back = await scrape(own.base);
    assert.ok(value(back, 'charter_db_reconnects_total') >= 1);
    const p = promtool(back);
    assert.equal(p.status, 0, p.stdout + p.stderr);
  } finally {
    await own.stop();
    await stopRedis(redis);
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
