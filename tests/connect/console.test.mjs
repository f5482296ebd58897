// console.test.mjs - the console in a real browser: Debian's chromium, headless, driven by
// puppeteer-core against a real charterd. The operator signs in, starts the procurement run,
// sees the handoff denied with its witness drawn, revokes and recovers (denied), restores and
// recovers (the public delivery allowed), replays it and audits the run; the viewer then
// finds no form of the budget figure on any page or in any answer, and no action that works;
// a delivery held for the CFO's approval is approved with one click;
// the first screen shows the pending approvals and the recent refusals; the run list shows
// workflow, task, age and status, and its filters and search narrow it; the address opens a run
// and a decision again after a reload; a second stored workflow is started from the console;
// the grant box offers exactly the grants of the run's delegation chains; a task carrying HTML
// is shown as text; the token is never in a URL, a cookie or storage. Screenshots go to the
// build directory (CHARTER_BUILD_DIR).
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import puppeteer from 'puppeteer-core';
import { OPERATOR, VIEWER, post, startCharterd } from './charterd.mjs';

const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.CHARTER_BUILD_DIR;
const BUDGET = [/48200/, /48,200/, /48\.200/, /48 200/, /CEILING-48200/i];

let d, browser, page;
const urls = [];
const bodies = [];

before(async () => {
  d = await startCharterd({ name: 'console' });
  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
  });
  page = await browser.newPage();
  await page.setViewport({ width: 1360, height: 900 });
  page.on('request', (r) => urls.push(r.url()));
  page.on('response', async (r) => {
    try { bodies.push({ url: r.url(), text: await r.text() }); } catch (e) { /* redirects */ }
  });
  page.on('pageerror', (e) => { throw e; });
});

after(async () => {
  await browser?.close();
  await d?.stop();
});

async function signIn(token) {
  await page.goto(`${d.base}/`, { waitUntil: 'load' });
  await signInHere(token);
}

// Signs in on the page as it is (a reload keeps the address, and signs out).
async function signInHere(token) {
  await page.waitForSelector('#token');
  await page.type('#token', token);
  await page.click('#signin-form button[type=submit]');
  await page.waitForFunction(() => /signed in as/.test(document.getElementById('who').textContent));
  await page.waitForSelector('#runs li'); // the list (or "No runs yet.") has loaded
}

// Clicks the enabled button labelled text inside scope, in the page itself, so a re-render
// between finding and clicking cannot detach it.
async function clickButton(scope, text) {
  await page.waitForFunction((scope, text) => {
    for (const b of document.querySelectorAll(scope + ' button')) {
      if (b.textContent.trim() === text && !b.disabled) {
        b.click();
        return true;
      }
    }
    return false;
  }, { timeout: 20000 }, scope, text);
}

// Opens run id from the run list by clicking its button in the page itself: the list is drawn
// again every second while a run is followed, and a click by coordinates that lands as it is
// redrawn can open another run (or none).
async function openListedRun(id) {
  await page.waitForFunction((id) => {
    const b = document.querySelector(`#runs button[data-run="${id}"]`);
    if (!b) return false;
    b.click();
    return true;
  }, { timeout: 20000 }, id);
}

// A Connect call as the operator, failing the test unless it answers 200.
async function api(m, body) {
  const r = await post(d.base, m, body, OPERATOR);
  assert.equal(r.status, 200, `${m}: ${JSON.stringify(r.body)}`);
  return r.body;
}

// The grants of a run's delegation chains, asked of the server: each step's grant in the
// run's workflow definition and every grant above it.
async function chainGrants(runId) {
  const run = (await api('Runs/GetRun', { runId, limit: 1 })).run;
  const def = JSON.parse(Buffer.from((await api('Workflows/GetWorkflow', { workflow: run.workflow })).definition,
    'base64').toString('utf8'));
  const ids = new Set();
  for (const step of def.steps) {
    for (const g of (await api('Grants/ShowChain', { grantId: step.grant })).grants) ids.add(g.id);
  }
  return [...ids].sort();
}

// The grant box of the open run once it has read the chain: its values, and the one chosen.
async function grantBox() {
  await page.waitForSelector('#grant-id[data-ready=yes]', { timeout: 20000 });
  return page.$eval('#grant-id', (s) => ({ values: [...s.options].map((o) => o.value).sort(), chosen: s.value }));
}

// Whether the element sel is entirely within the first screen (the viewport, not scrolled).
async function onFirstScreen(sel) {
  return page.$eval(sel, (e) => {
    const r = e.getBoundingClientRect();
    return window.scrollY === 0 && r.top >= 0 && r.bottom <= window.innerHeight && r.height > 0;
  });
}

// The ids of the rows the run list shows.
async function listedRuns() {
  return page.$$eval('#runs button[data-run]', (bs) => bs.map((b) => b.getAttribute('data-run')));
}

// The text of sel once it matches re (the page re-renders while a run is reloaded).
async function resultText(sel, re) {
  const h = await page.waitForFunction((sel, src) => {
    const e = document.querySelector(sel);
    return e && new RegExp(src).test(e.textContent) ? e.textContent : null;
  }, { timeout: 20000 }, sel, re.source);
  return h.jsonValue();
}

test('the console is served with a strict policy and no cookie', async () => {
  const r = await fetch(`${d.base}/`);
  assert.equal(r.status, 200);
  const csp = r.headers.get('content-security-policy');
  assert.match(csp, /default-src 'none'/);
  assert.match(csp, /script-src 'self'(;|$)/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.equal(r.headers.get('x-content-type-options'), 'nosniff');
  assert.equal(r.headers.get('set-cookie'), null);
  assert.doesNotMatch(await r.text(), /<script>|<script [^>]*>[^<]/); // no inline script
});

test('the operator starts the procurement run and sees the handoff denied with its witness drawn', async () => {
  await signIn(OPERATOR);
  assert.equal(await page.$eval('#who', (e) => e.textContent), 'signed in as operator');
  await clickButton('#run-actions', 'Start scripted run');
  await page.waitForSelector('#run-head .badge.blocked', { timeout: 30000 });
  const deny = 'article.decision.DENY[data-kind=input_checked]';
  await page.waitForSelector(deny);
  const text = await page.$eval(deny, (e) => e.textContent);
  assert.match(text, /INPUT_OUT_OF_SCOPE/);
  assert.match(text, /budget \(confidential\) → Internal recommendation → report step/);
  // The lineage: the budget resource, its source, the recommendation and the step are on the
  // witness path; the recommendation's edge into the report step is the refused one.
  const hot = await page.$$eval(`${deny} svg g.node.hot`, (gs) => gs.map((g) => g.getAttribute('data-node')));
  assert.ok(hot.includes('r:budget'), hot.join(','));
  assert.ok(hot.includes('step'), hot.join(','));
  assert.ok(!hot.includes('r:vendor_a'), hot.join(','));
  const offending = await page.$$eval(`${deny} svg path.offending`, (ps) => ps.map((p) => p.getAttribute('data-edge')));
  assert.equal(offending.length, 1);
  assert.match(offending[0], /^a:a\d+>step$/);
  const cfo = await page.$eval('#deliveries', (e) => e.textContent);
  assert.match(cfo, /cfo/);
  // The refusal is on the first screen twice: at the top of the run's page, linking to the
  // decision, and among the recent refusals, with the run's workflow.
  const runId = await page.$eval('#run-head', (h) => h.querySelector('h2 .mono').textContent);
  const seq = await page.$eval(deny, (e) => e.getAttribute('data-seq'));
  assert.ok(await onFirstScreen('#run-stop'), 'the refusal at the top of the run is below the fold');
  const stop = await page.$eval('#run-stop', (e) => ({ text: e.textContent, href: e.querySelector('a').getAttribute('href') }));
  assert.match(stop.text, new RegExp(`Refused at #${seq}\\s*DENY\\s*input gate: inputs of step report\\s*INPUT_OUT_OF_SCOPE`));
  assert.match(stop.text, /budget \(confidential\) → Internal recommendation → report step/);
  assert.equal(stop.href, `#run=${runId}&decision=${seq}`);
  const glance = `#refusals-list li[data-run="${runId}"][data-seq="${seq}"]`;
  await page.waitForSelector(glance);
  assert.ok(await onFirstScreen(glance), 'the recent refusal is below the fold');
  assert.match(await page.$eval(glance, (e) => e.textContent), /DENY.*INPUT_OUT_OF_SCOPE.*procurement · run/);
  await page.screenshot({ path: path.join(SHOTS, 'console-run-blocked.png'), fullPage: false });
  const card = await page.$(deny);
  await card.screenshot({ path: path.join(SHOTS, 'console-witness.png') });
});

test('revoking the reporter grant keeps recovery denied; restoring it lets the public delivery through', async () => {
  // The grant box offers the grants of the run's chains, the refused step's own chosen.
  const runId = await page.$eval('#run-head', (h) => h.querySelector('h2 .mono').textContent);
  const box = await grantBox();
  assert.deepEqual(box.values, await chainGrants(runId));
  assert.deepEqual(box.values, ['g_analyst', 'g_reporter', 'g_research', 'g_root']);
  assert.equal(box.chosen, 'g_reporter');
  await page.select('#grant-id', 'g_reporter');
  await clickButton('#run-head', 'Revoke');
  assert.match(await resultText('#action-result', /Revoked g_reporter/), /Revoked g_reporter/);
  await clickButton('#run-head', 'Recover');
  const denied = await resultText('#action-result', /Recovery[\s\S]*(DENY|ALLOW|UNKNOWN)/);
  assert.match(denied, /DENY/);
  assert.match(denied, /GRANT_INVALID/);
  await clickButton('#run-head', 'Restore');
  assert.match(await resultText('#action-result', /Restored/), /g_reporter/);
  await clickButton('#run-head', 'Recover');
  const allowed = await resultText('#action-result', /Recovery.*ALLOW/);
  assert.match(allowed, /→ public/);
  await page.waitForSelector('#run-head .badge.completed');
  await page.waitForSelector('#deliveries tr[data-invocation$=":deliver"]');
  const rows = await page.$$eval('#deliveries tr[data-invocation]', (trs) => trs.map((t) => t.textContent));
  assert.ok(rows.some((r) => /public/.test(r)), rows.join('\n'));
  const allow = 'article.decision.ALLOW[data-kind=delivery_decided]';
  const sends = await page.$$eval(allow, (as) => as.map((a) => a.textContent));
  assert.ok(sends.some((t) => /to public/.test(t)), sends.join('\n'));
});

test('the public delivery replays to the same decision and the run audits intact', async () => {
  const seq = await page.$$eval('article.decision.ALLOW[data-kind=delivery_decided]', (as) => {
    const pub = as.filter((a) => /to public/.test(a.textContent));
    return pub[pub.length - 1].getAttribute('data-seq');
  });
  const sel = `article.decision[data-seq="${seq}"]`;
  await clickButton(sel, 'Replay');
  const replay = await resultText(`${sel} .result`, /Replayed/);
  assert.match(replay, /ALLOW/);
  assert.match(replay, /matches the recorded decision/);
  await clickButton('#run-head', 'Audit run');
  assert.match(await resultText('#action-result', /Audit:/), /event chain intact/);
  // What if: the run's own workflow, uploaded, changes none of its decisions.
  const file = await page.$('#whatif-file');
  await file.uploadFile(path.join(import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname),
    '../../deploy/workflows/procurement.json'));
  await clickButton('#run-head', 'Compare decisions');
  const whatif = await resultText('#action-result', /What if .*decisions examined/);
  assert.match(whatif, /[1-9]\d* decisions examined, 0 would change/);
  await page.screenshot({ path: path.join(SHOTS, 'console-run-recovered.png'), fullPage: true });
});

test('the address opens a run and a decision, and a reload keeps them', async () => {
  const runId = await page.$eval('#run-head', (h) => h.querySelector('h2 .mono').textContent);
  const deny = 'article.decision.DENY[data-kind=input_checked]';
  const seq = await page.$eval(deny, (e) => e.getAttribute('data-seq'));
  // A decision's own link names the run and the decision in the address.
  await page.click(`${deny} a.permalink`);
  await page.waitForFunction(() => location.hash.includes('decision='));
  assert.equal(new URL(page.url()).hash, `#run=${runId}&decision=${seq}`);
  // A reload signs out but keeps the address; signing in again opens that run at that decision.
  await page.reload({ waitUntil: 'load' });
  assert.equal(await page.$eval('#app', (e) => e.hidden), true);
  await signInHere(OPERATOR);
  const target = `article.decision.target[data-seq="${seq}"]`;
  await page.waitForSelector(target, { timeout: 20000 });
  assert.match(await page.$eval('#run-head', (h) => h.textContent), new RegExp(runId));
  assert.equal(await page.$$eval('.target', (ts) => ts.length), 1);
  const inView = await page.$eval(target, (e) => {
    const r = e.getBoundingClientRect();
    return r.top >= 0 && r.top < window.innerHeight;
  });
  assert.ok(inView, 'the linked decision is not scrolled into view');
  assert.equal(new URL(page.url()).hash, `#run=${runId}&decision=${seq}`);
  await page.screenshot({ path: path.join(SHOTS, 'console-deep-link.png'), fullPage: false });
  // A link typed into the address bar opens another decision of the run: the public delivery.
  const pub = await page.$$eval('article.decision.ALLOW[data-kind=delivery_decided]', (as) =>
    as.filter((a) => /to public/.test(a.textContent)).pop().getAttribute('data-seq'));
  await page.goto(`${d.base}/#run=${runId}&decision=${pub}`, { waitUntil: 'load' });
  await page.waitForSelector(`article.decision.target[data-seq="${pub}"]`, { timeout: 20000 });
  assert.equal(await page.$$eval('.target', (ts) => ts.length), 1);
  // An address naming a decision the run does not have says so.
  await page.goto(`${d.base}/#run=${runId}&decision=9999`, { waitUntil: 'load' });
  assert.match(await resultText('#status', /has no decision/), new RegExp(`Run ${runId} has no decision #9999`));
  assert.equal(await page.$$eval('.target', (ts) => ts.length), 0);
  assert.ok(await page.$eval('#status', (e) => { const r = e.getBoundingClientRect(); return r.bottom <= window.innerHeight && r.top >= 0; }),
    'the message is off the screen');
  await page.screenshot({ path: path.join(SHOTS, 'console-bad-link.png'), fullPage: false });
  // The recent refusal on the first screen is a link to the same decision.
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.click(`#refusals-list li[data-run="${runId}"][data-seq="${seq}"] a`);
  await page.waitForSelector(target, { timeout: 20000 });
  assert.equal(new URL(page.url()).hash, `#run=${runId}&decision=${seq}`);
  // The list opens a run without a decision in the address.
  await openListedRun(runId);
  await page.waitForFunction((h) => location.hash === h, {}, `#run=${runId}`);
});

test('a delivery held for the CFO is approved from the run page with one click', async () => {
  // A host drives an external run of the approval workflow up to the held send.
  const here = import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname);
  const def = fs.readFileSync(path.join(here, '../workflows/approval.json'));
  const call = async (m, body) => {
    const r = await post(d.base, m, body, OPERATOR);
    assert.equal(r.status, 200, `${m}: ${JSON.stringify(r.body)}`);
    return r.body;
  };
  const wf = await call('Workflows/ApplyWorkflow', { definition: def.toString('base64') });
  const run = (await call('Runs/CreateRun', { mode: 'external', workflow: wf.version })).run;
  const ctx = (await call('Gate/OpenStep', { runId: run.id, step: 'analyze' })).contextId;
  const src = (await call('Gate/ReadSource', { contextId: ctx, resourceId: 'budget' })).artifact.id;
  const out = (await call('Gate/RecordOutput', { contextId: ctx, inputIds: [src], title: 'Internal recommendation',
    content: 'Recommendation: vendor_b, within the approved ceiling.' })).artifact.id;
  const held = await call('Gate/Deliver', { contextId: ctx, payloadId: out, recipient: 'cfo',
    tool: 'deliver_internal', invocationId: `${run.id}:analyze:console` });
  assert.equal(held.decision.outcome, 'UNKNOWN');
  assert.deepEqual(held.decision.codes, ['APPROVAL_PENDING']);
  assert.match(held.pendingApproval, /^ap-[0-9a-f]{32}$/);
  assert.equal(held.delivery, undefined);
  // It waits on the first screen, a link to its row on the run's page.
  await page.click('#refresh-runs');
  await page.evaluate(() => window.scrollTo(0, 0));
  const waiting = `#pending-list li[data-approval="${held.pendingApproval}"]`;
  await page.waitForSelector(waiting);
  assert.ok(await onFirstScreen(waiting), 'the pending approval is below the fold');
  assert.match(await page.$eval(waiting, (e) => e.textContent),
    new RegExp(`human_cfo to decide deliver_internal ${out} → cfo.*run ${run.id} · step analyze`));
  assert.equal(await page.$eval('#pending-count', (e) => e.textContent), '1');
  await page.screenshot({ path: path.join(SHOTS, 'console-pending.png'), fullPage: false });
  await page.click(`${waiting} a`);
  await page.waitForSelector(`#approvals tr.target[data-approval="${held.pendingApproval}"]`, { timeout: 20000 });
  assert.equal(new URL(page.url()).hash, `#run=${run.id}&approval=${held.pendingApproval}`);
  // The operator finds it on the run's page and approves it on behalf of human_cfo.
  await page.waitForSelector(`#runs button[data-run="${run.id}"]`);
  await openListedRun(run.id);
  const row = `#approvals tr[data-approval="${held.pendingApproval}"]`;
  await page.waitForSelector(`${row}[data-state=pending]`);
  await clickButton(row, 'Approve as human_cfo');
  await page.waitForSelector(`#approvals tr[data-approval="${held.pendingApproval}"][data-state=approved]`, { timeout: 20000 });
  const decided = await page.$eval('#approvals', (e) => e.textContent);
  assert.match(decided, /by human_cfo/);
  await page.waitForSelector(`#deliveries tr[data-invocation="${run.id}:analyze:console"]`);
  // The server agrees, and a second decision is refused naming the first.
  const again = await post(d.base, 'Approvals/DecideApproval', { approvalId: held.pendingApproval,
    decision: 'deny', actor: 'human_cfo' }, OPERATOR);
  assert.equal(again.status, 400);
  assert.match(again.body.message, /already decided: approved by human_cfo/);
  await page.waitForFunction(() => /Nothing waits for a human/.test(document.querySelector('#pending-list').textContent));
  await page.screenshot({ path: path.join(SHOTS, 'console-approval.png'), fullPage: false });
});

test('the operator cancels a blocked run from its page, and recovery is then refused', async () => {
  await clickButton('#run-actions', 'Start scripted run');
  await page.waitForSelector('#run-head .badge.blocked', { timeout: 30000 });
  await page.$eval('#cancel-reason', (e) => { e.value = 'do not publish'; });
  await clickButton('#run-head', 'Cancel run');
  assert.match(await resultText('#action-result', /Run .* is /), /is cancelled \(do not publish\)/);
  await page.waitForSelector('#run-head .badge.cancelled');
  await clickButton('#run-head', 'Recover');
  await page.waitForSelector('#action-result .error', { timeout: 20000 });
  const refused = await page.$eval('#action-result .error', (e) => e.textContent);
  assert.match(refused, /cancelled/);
});

test('the run list shows workflow, task, age and status; its filters and search narrow it', async () => {
  // A run whose task carries HTML: the list and the run's page show it as text.
  const needle = `needle-${process.pid}`;
  const html = `<img src=x onerror="document.title='pwned'"><b>${needle}</b>`;
  const xss = (await api('Runs/CreateRun', { mode: 'external', task: html })).run;
  await page.evaluate(() => window.scrollTo(0, 0));
  await page.click('#refresh-runs');
  await page.waitForSelector(`#runs button[data-run="${xss.id}"]`);
  const all = (await api('Runs/ListRuns', { limit: 200 })).runs;
  const names = new Map((await api('Workflows/ListWorkflows', {})).workflows.map((w) => [w.version, w.name]));
  assert.deepEqual(await listedRuns(), all.map((r) => r.id));
  assert.ok(new Set(all.map((r) => r.status)).size >= 3, all.map((r) => r.status).join(','));
  for (const r of all) {
    const row = await page.$eval(`#runs button[data-run="${r.id}"]`, (b) => ({
      wf: b.querySelector('.wf').textContent, task: b.querySelector('.task').textContent,
      age: b.querySelector('.age').textContent, status: b.querySelector('.badge').textContent }));
    assert.equal(row.wf, names.get(r.workflow), r.id);
    assert.equal(row.task, r.task, r.id);
    assert.match(row.age, /^(just now|\d+ (min|h|d) ago)$/, r.id);
    assert.equal(row.status, r.status, r.id);
  }
  assert.equal(await page.$$eval('img, b', (es) => es.length), 0);
  assert.notEqual(await page.title(), 'pwned');
  assert.equal(await page.$eval(`#runs button[data-run="${xss.id}"] .task`, (e) => e.textContent), html);
  assert.match(await page.$eval('#runs-count', (e) => e.textContent), new RegExp(`^${all.length} runs$`));
  await page.screenshot({ path: path.join(SHOTS, 'console-first-screen.png'), fullPage: false });
  // The status filter keeps only the runs of that status.
  await page.select('#filter-status', 'cancelled');
  const cancelled = all.filter((r) => r.status === 'cancelled').map((r) => r.id);
  assert.ok(cancelled.length >= 1 && cancelled.length < all.length);
  assert.deepEqual(await listedRuns(), cancelled);
  assert.equal(await page.$eval('#runs-count', (e) => e.textContent), `${cancelled.length} of ${all.length} runs`);
  // The workflow filter, on its own and with the status filter.
  await page.select('#filter-status', '');
  await page.select('#filter-workflow', 'procurement_approval');
  const approval = all.filter((r) => names.get(r.workflow) === 'procurement_approval').map((r) => r.id);
  assert.ok(approval.length >= 1 && approval.length < all.length);
  assert.deepEqual(await listedRuns(), approval);
  await page.select('#filter-status', 'cancelled');
  assert.deepEqual(await listedRuns(), all.filter((r) => r.status === 'cancelled' &&
    names.get(r.workflow) === 'procurement_approval').map((r) => r.id));
  await page.select('#filter-status', '');
  await page.select('#filter-workflow', '');
  // The search finds a run by a word of its task, and by its id.
  await page.type('#run-search', needle);
  assert.deepEqual(await listedRuns(), [xss.id]);
  await page.screenshot({ path: path.join(SHOTS, 'console-search.png'), fullPage: false });
  await page.$eval('#run-search', (e) => { e.value = ''; });
  await page.type('#run-search', cancelled[0]);
  assert.deepEqual(await listedRuns(), [cancelled[0]]);
  await page.$eval('#run-search', (e) => { e.value = ''; });
  await page.type('#run-search', 'no run has this word');
  assert.deepEqual(await listedRuns(), []);
  assert.match(await page.$eval('#runs', (e) => e.textContent), /No run matches/);
  await page.$eval('#run-search', (e) => { e.value = ''; e.dispatchEvent(new Event('input')); });
  assert.deepEqual(await listedRuns(), all.map((r) => r.id));
  // Its page shows the task as text too.
  await openListedRun(xss.id);
  await page.waitForFunction((id) => document.querySelector('#run-head')?.textContent.includes(id), {}, xss.id);
  assert.equal(await page.$eval('#run-head .task', (e) => e.textContent), html);
  assert.equal(await page.$$eval('img, b', (es) => es.length), 0);
});

test('the operator starts a second stored workflow, and its grant box offers its own chain', async () => {
  const here = import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname);
  const def = fs.readFileSync(path.join(here, '../../deploy/workflows/support.json'));
  const wf = await api('Workflows/ApplyWorkflow', { definition: def.toString('base64') });
  await page.click('#refresh-runs');
  await page.waitForSelector(`#start-workflow option[value="${wf.version}"]`);
  await page.select('#start-workflow', wf.version);
  const task = `Ticket ${process.pid}: a duplicate charge`;
  await page.type('#start-task', task);
  const before = new Set((await api('Runs/ListRuns', {})).runs.map((r) => r.id));
  await clickButton('#run-actions', 'Start scripted run');
  await page.waitForFunction(() => /support/.test(document.querySelector('#run-head h2')?.textContent || ''), { timeout: 30000 });
  const created = (await api('Runs/ListRuns', {})).runs.filter((r) => !before.has(r.id));
  assert.equal(created.length, 1);
  const run = created[0];
  assert.equal(run.workflow, wf.version);
  assert.equal(run.task, task);
  assert.match(await page.$eval('#run-head', (h) => h.textContent), new RegExp(run.id));
  assert.equal(new URL(page.url()).hash, `#run=${run.id}`);
  const row = await page.$eval('#runs li:first-child button', (b) => ({ id: b.getAttribute('data-run'),
    wf: b.querySelector('.wf').textContent }));
  assert.deepEqual(row, { id: run.id, wf: 'support' });
  // Its grants are the support workflow's chain, none of procurement's.
  const box = await grantBox();
  assert.deepEqual(box.values, await chainGrants(run.id));
  assert.ok(box.values.includes('g_support') && !box.values.includes('g_reporter'), box.values.join(','));
  assert.ok(box.values.includes(box.chosen), box.chosen);
  await page.screenshot({ path: path.join(SHOTS, 'console-support-run.png'), fullPage: false });
  // The first screen lists four refusals; the rest are one click away.
  const shown = () => page.$$eval('#refusals-list li[data-seq]', (ls) => ls.length);
  const known = Number(await page.$eval('#refusals-count', (e) => e.textContent));
  assert.ok(known >= 4, String(known));
  await api('Runs/CreateRun', { mode: 'scripted' }); // one more blocked procurement run
  await page.click('#refresh-runs');
  await page.waitForFunction((n) => document.querySelector('#refusals-count').textContent === String(n), {}, known + 1);
  assert.equal(await shown(), 4);
  await clickButton('#refusals-list', `Show all ${known + 1}`);
  assert.equal(await shown(), known + 1);
  await clickButton('#refusals-list', 'Show fewer');
  assert.equal(await shown(), 4);
});

// The payments run, scripted: its tool calls are invoke decisions, each argument shown with its
// value, where it came from, and the sources its lineage reaches.
const IBAN_BILL = 'DE89370400440532013000';
const IBAN_INJECTED = 'GB33BUKB20201555555555';
let paymentsRun = '';

async function openByAddress(runId) {
  await page.evaluate((id) => { location.hash = '#run=' + id; }, runId);
  await page.waitForFunction((id) => (document.querySelector('#run-head')?.textContent || '').includes(id), {}, runId);
}

async function argumentRow(seq, name) {
  return page.$eval(`article.decision[data-seq="${seq}"] tr[data-argument="${name}"]`,
    (tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent));
}

test('an invoke decision shows each argument with its value and lineage', async () => {
  const here = import.meta.dirname ?? path.dirname(new URL(import.meta.url).pathname);
  const def = fs.readFileSync(path.join(here, '../../deploy/workflows/payments.json'));
  const wf = await api('Workflows/ApplyWorkflow', { definition: def.toString('base64') });
  paymentsRun = (await api('Runs/CreateRun', { mode: 'scripted', workflow: wf.version })).run.id;
  for (let i = 0; i < 300; i++) {
    const st = (await api('Runs/GetRun', { runId: paymentsRun, limit: 1 })).run.status;
    if (st === 'completed') break;
    assert.ok(['created', 'queued', 'running'].includes(st), st);
    await new Promise((r) => setTimeout(r, 100));
  }
  await page.click('#refresh-runs');
  await openByAddress(paymentsRun);
  const calls = 'article.decision[data-kind=invoke_decided]';
  await page.waitForFunction((sel) => document.querySelectorAll(sel).length === 5, { timeout: 20000 }, calls);
  const seqs = await page.$$eval(calls, (as) => as.map((a) => ({ seq: a.getAttribute('data-seq'),
    outcome: [...a.classList].find((c) => /^(ALLOW|DENY|UNKNOWN)$/.test(c)), text: a.textContent })));
  assert.deepEqual(seqs.map((c) => c.outcome), ['DENY', 'DENY', 'DENY', 'DENY', 'ALLOW']);
  // The injected IBAN quoted from the transaction note.
  const [quoted, written, , exfil, paid] = seqs;
  assert.match(quoted.text, /tool gate: call of send_money to payee_any by step pay/);
  assert.match(quoted.text, /CONTROL_UNTRUSTED/);
  assert.match(quoted.text, /argument iban ← transactions \(untrusted\): a control argument must be trusted/);
  assert.deepEqual(await argumentRow(quoted.seq, 'iban'), ['iban', 'control', IBAN_INJECTED,
    'quoted from Recent transactions with their notes',
    'Recent transactions with their notes ← transactions (untrusted, internal)']);
  assert.deepEqual(await argumentRow(quoted.seq, 'amount'), ['amount', 'control', '84.20', 'the task',
    "the human's task (trusted, public)"]);
  // The same IBAN written by the model: its lineage is the output, hence every input.
  assert.deepEqual(await argumentRow(written.seq, 'iban'), ['iban', 'control', IBAN_INJECTED,
    'written by the model',
    'Payment summary ← bill (trusted, internal), transactions (untrusted, internal)']);
  // The exfiltration through a data argument: the body's lineage reaches the bill.
  assert.match(exfil.text, /CLEARANCE_EXCEEDED/);
  const body = await argumentRow(exfil.seq, 'body');
  assert.equal(body[1], 'data');
  assert.match(body[4], /bill \(trusted, internal\)/);
  // The bill's IBAN quoted from the bill is the one paid.
  assert.match(paid.text, /call of send_money to payee_saved by step pay/);
  assert.deepEqual(await argumentRow(paid.seq, 'iban'), ['iban', 'control', IBAN_BILL,
    "quoted from The user's electricity bill", "The user's electricity bill ← bill (trusted, internal)"]);
  // Read-only: nothing in an argument table is a control.
  assert.equal(await page.$$eval(`${calls} table.arguments :is(input, select, button, textarea)`, (xs) => xs.length), 0);
  const card = await page.$(`article.decision[data-seq="${quoted.seq}"]`);
  await card.screenshot({ path: path.join(SHOTS, 'console-invoke.png') });
});

test('the token is in no URL, cookie or storage', async () => {
  for (const u of urls) {
    assert.ok(!u.includes(OPERATOR) && !u.includes(VIEWER), u);
  }
  assert.ok(!page.url().includes(OPERATOR));
  assert.deepEqual(await browser.defaultBrowserContext().cookies(), []);
  const stored = await page.evaluate(async () => ({
    cookie: document.cookie,
    local: localStorage.length,
    session: sessionStorage.length,
    idb: (await indexedDB.databases()).length,
    caches: (await caches.keys()).length,
  }));
  assert.deepEqual(stored, { cookie: '', local: 0, session: 0, idb: 0, caches: 0 });
  // Signing out forgets it: the next call would carry no token.
  await page.click('#signout');
  assert.equal(await page.$eval('#app', (e) => e.hidden), true);
});

test('the viewer sees no form of the budget figure on any page and has no action that works', async () => {
  // The operator's pages did show the confidential memo (so the check below can fail).
  const operatorSaw = bodies.some((b) => BUDGET.some((re) => re.test(b.text)));
  assert.ok(operatorSaw, 'the operator was never shown the budget memo');
  bodies.length = 0;
  await signIn(VIEWER);
  assert.equal(await page.$eval('#who', (e) => e.textContent), 'signed in as viewer');
  const ids = await page.$$eval('#runs button[data-run]', (bs) => bs.map((b) => b.getAttribute('data-run')));
  assert.ok(ids.length >= 1);
  for (const id of ids) {
    await openListedRun(id);
    await page.waitForFunction((id) => {
      const h = document.querySelector('#run-head');
      return h && h.textContent.includes(id);
    }, {}, id);
    const html = await page.content();
    const shown = await page.evaluate(() => document.body.innerText);
    for (const re of BUDGET) {
      assert.doesNotMatch(html, re, `run ${id} page`);
      assert.doesNotMatch(shown, re, `run ${id} text`);
    }
    // Buttons that open a run of the list are navigation; any other is an action or a read.
    const labels = await page.$$eval('button', (bs) => bs.filter((b) => !b.hidden && b.offsetParent !== null &&
      !b.hasAttribute('data-run')).map((b) => b.textContent.trim()));
    const allowed = new Set(['Sign out', 'Refresh', 'Receipt']); // reading a receipt is not an action
    for (const l of labels) assert.ok(allowed.has(l) || /^Show (all \d+|fewer)$/.test(l), `viewer is offered "${l}"`);
    const listed = await listedRuns();
    assert.ok(listed.every((r) => ids.includes(r)), listed.join(','));
    assert.equal(await page.$('#start-workflow'), null);
    assert.equal(await page.$('#grant-id'), null);
    assert.equal(await page.$('#whatif-file'), null);
  }
  for (const b of bodies) {
    for (const re of BUDGET) assert.doesNotMatch(b.text, re, b.url);
  }
  await page.screenshot({ path: path.join(SHOTS, 'console-run-viewer.png'), fullPage: false });
  // Actions sent anyway with the viewer's token are refused by the server.
  const refused = await page.evaluate(async (token, run) => {
    const out = [];
    for (const [m, body] of [['Grants/RevokeGrant', { grantId: 'g_reporter' }],
      ['Runs/RecoverRun', { runId: run }], ['Runs/CreateRun', { mode: 'scripted' }],
      ['Grants/RestoreGrants', { grantId: 'g_reporter' }]]) {
      const r = await fetch('/charter.v1.' + m, { method: 'POST', body: JSON.stringify(body),
        headers: { 'Content-Type': 'application/json', Authorization: 'Bearer ' + token } });
      out.push([m, r.status, (await r.json()).code]);
    }
    return out;
  }, VIEWER, ids[0]);
  for (const [m, status, code] of refused) {
    assert.equal(status, 403, m);
    assert.equal(code, 'permission_denied', m);
  }
});

test('the viewer sees an invoke decision\'s lineage with the values redacted', async () => {
  assert.ok(paymentsRun, 'the payments run was not created');
  await openByAddress(paymentsRun);
  const calls = 'article.decision[data-kind=invoke_decided]';
  await page.waitForFunction((sel) => document.querySelectorAll(sel).length === 5, { timeout: 20000 }, calls);
  const seq = await page.$eval(`${calls}.DENY`, (a) => a.getAttribute('data-seq'));
  assert.deepEqual(await argumentRow(seq, 'iban'), ['iban', 'control', '(redacted)',
    'quoted from Recent transactions with their notes',
    'Recent transactions with their notes ← transactions (untrusted, internal)']);
  const html = await page.content();
  for (const iban of [IBAN_BILL, IBAN_INJECTED]) assert.ok(!html.includes(iban), `the viewer was shown ${iban}`);
});
