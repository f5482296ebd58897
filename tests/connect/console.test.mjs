// console.test.mjs - the console in a real browser: Debian's chromium, headless, driven by
// puppeteer-core against a real charterd. The operator signs in, starts the procurement run,
// sees the handoff denied with its witness drawn, revokes and recovers (denied), restores and
// recovers (the public delivery allowed), replays it and audits the run; the viewer then
// finds no form of the budget figure on any page or in any answer, and no action that works;
// a delivery held for the CFO's approval is approved with one click;
// the token is never in a URL, a cookie or storage. Screenshots go to the build directory.
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
  await page.screenshot({ path: path.join(SHOTS, 'console-run-blocked.png'), fullPage: false });
  const card = await page.$(deny);
  await card.screenshot({ path: path.join(SHOTS, 'console-witness.png') });
});

test('revoking the reporter grant keeps recovery denied; restoring it lets the public delivery through', async () => {
  await page.$eval('#grant-id', (e) => { e.value = 'g_reporter'; });
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
  // The operator finds it on the run's page and approves it on behalf of human_cfo.
  await page.click('#refresh-runs');
  await page.waitForSelector(`#runs button[data-run="${run.id}"]`);
  await page.click(`#runs button[data-run="${run.id}"]`);
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
    await page.click(`#runs button[data-run="${id}"]`);
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
    const labels = await page.$$eval('button', (bs) => bs.filter((b) => !b.hidden && b.offsetParent !== null)
      .map((b) => b.textContent.trim()));
    const allowed = new Set(['Sign out', 'Refresh', 'Receipt']); // reading a receipt is not an action
    for (const l of labels) {
      assert.ok(allowed.has(l) || ids.includes(l.replace(/(completed|blocked|created|running|error|interrupted|recovering|cancelled|queued|budget_exhausted)$/, '')),
        `viewer is offered "${l}"`);
    }
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
