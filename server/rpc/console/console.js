/*
 * console.js - charter's operator console: the runs of the graph, each run's events, decisions
 * (codes, witness and the lineage they were decided on, drawn as SVG), deliveries and
 * receipts, and the operator's actions, all through the Connect JSON API of the same server.
 *
 * The token lives in one variable of this closure: never in the URL, a cookie or storage, so
 * a reload signs out. Every text from the server is placed with textContent (an artifact can
 * carry a prompt injection; none of it is ever parsed as HTML). The role the server reports
 * for the token (Health/Check) decides which actions are shown; the server refuses anything a
 * viewer sends anyway.
 */
(function () {
  'use strict';

  let token = null;
  let role = '';
  let scriptedOnly = false;
  let currentRun = null;
  let followTimer = null;
  let actionOut = null; /* the result box of the run's actions: kept across re-renders */

  const $ = (id) => document.getElementById(id);
  const SVGNS = 'http://www.w3.org/2000/svg';
  const CONF = ['public', 'internal', 'confidential'];

  /* --- DOM --------------------------------------------------------------------------------- */

  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === undefined || v === null || v === false) continue;
      if (k === 'class') e.className = v;
      else if (k === 'text') e.textContent = v;
      else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v === true ? '' : String(v));
    }
    for (const k of kids.flat()) {
      if (k === null || k === undefined || k === false) continue;
      e.append(typeof k === 'string' || typeof k === 'number' ? document.createTextNode(String(k)) : k);
    }
    return e;
  }

  function svg(tag, attrs, ...kids) {
    const e = document.createElementNS(SVGNS, tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (k === 'text') e.textContent = v;
      else e.setAttribute(k, String(v));
    }
    for (const k of kids) if (k) e.append(k);
    return e;
  }

  function badge(text) {
    return el('span', { class: 'badge ' + text, text });
  }

  function say(text) {
    $('status').textContent = text || '';
  }

  /* --- the API ----------------------------------------------------------------------------- */

  class ApiError extends Error {
    constructor(code, message) {
      super(message);
      this.code = code;
    }
  }

  /* One Connect unary call: POST /charter.v1.<Service>/<Method> with the JSON message. */
  async function call(method, body) {
    const headers = { 'Content-Type': 'application/json' };
    if (token) headers.Authorization = 'Bearer ' + token;
    const res = await fetch('/charter.v1.' + method, {
      method: 'POST',
      headers,
      body: JSON.stringify(body || {}),
      credentials: 'omit',
      cache: 'no-store',
      referrerPolicy: 'no-referrer',
    });
    const text = await res.text();
    let j = null;
    try {
      j = JSON.parse(text);
    } catch (e) {
      j = null;
    }
    if (!res.ok) {
      throw new ApiError((j && j.code) || 'unknown', (j && j.message) || text || res.statusText);
    }
    return j || {};
  }

  function failure(e) {
    return e instanceof ApiError ? e.code + ': ' + e.message : String(e);
  }

  /* Runs fn for a button, showing what came back (or the refusal) in out. */
  function action(label, fn, out, cls) {
    const b = el('button', { type: 'button', class: cls, text: label });
    b.addEventListener('click', async () => {
      b.disabled = true;
      if (out) out.replaceChildren(el('span', { class: 'muted', text: label + '…' }));
      try {
        await fn(out);
      } catch (e) {
        if (out) out.replaceChildren(el('span', { class: 'error', text: failure(e) }));
        else say(failure(e));
      } finally {
        b.disabled = false;
      }
    });
    return b;
  }

  /* --- sign in ----------------------------------------------------------------------------- */

  async function signIn(ev) {
    ev.preventDefault();
    const input = $('token');
    const candidate = input.value.trim();
    input.value = '';
    $('signin-error').textContent = '';
    token = candidate;
    let h;
    try {
      h = await call('Health/Check', {});
    } catch (e) {
      token = null;
      $('signin-error').textContent = failure(e);
      return;
    }
    if (h.role !== 'operator' && h.role !== 'viewer') {
      token = null;
      $('signin-error').textContent = 'That token is not valid for this server.';
      return;
    }
    role = h.role;
    scriptedOnly = !!h.scriptedOnly;
    $('server').textContent = 'graph ' + (h.graph || '?') + ' · charterd ' + (h.version || '?') +
      (scriptedOnly ? ' · scripted runs only' : '');
    $('who').textContent = 'signed in as ' + role;
    $('signout').hidden = false;
    $('signin').hidden = true;
    $('app').hidden = false;
    renderRunActions();
    await loadRuns();
  }

  function signOut() {
    token = null;
    role = '';
    currentRun = null;
    stopFollowing();
    $('run').replaceChildren();
    $('runs').replaceChildren();
    $('run-actions').replaceChildren();
    $('who').textContent = '';
    $('server').textContent = '';
    $('signout').hidden = true;
    $('app').hidden = true;
    $('signin').hidden = false;
    say('');
  }

  /* --- runs list --------------------------------------------------------------------------- */

  function renderRunActions() {
    const box = $('run-actions');
    box.replaceChildren();
    if (role !== 'operator') {
      box.append(el('p', { class: 'muted', text: 'Read-only: confidential content is redacted.' }));
      return;
    }
    const out = el('div', { class: 'muted' });
    const start = (mode) => async () => {
      say('Starting a ' + mode + ' run…');
      const v = await call('Runs/CreateRun', { mode });
      out.replaceChildren();
      say('');
      await loadRuns();
      await openRun(v.run.id);
    };
    const row = el('div', { class: 'actions' }, action('Start scripted run', start('scripted'), out));
    if (!scriptedOnly) row.append(action('Start live run', start('live'), out, 'quiet'));
    box.append(row, out);
  }

  async function loadRuns() {
    const r = await call('Runs/ListRuns', { limit: 50 });
    const list = $('runs');
    list.replaceChildren();
    for (const run of r.runs || []) {
      const b = el('button', { type: 'button', 'data-run': run.id,
        class: currentRun === run.id ? 'current' : null,
        onclick: () => openRun(run.id).catch((e) => say(failure(e))) },
        el('span', { class: 'rid', text: run.id }), badge(run.status || '?'));
      list.append(el('li', {}, b));
    }
    if (!(r.runs || []).length) list.append(el('li', { class: 'muted', text: 'No runs yet.' }));
  }

  /* --- one run ----------------------------------------------------------------------------- */

  function stopFollowing() {
    if (followTimer) clearTimeout(followTimer);
    followTimer = null;
  }

  // GetRun answers in pages (the events with the deliveries they decided; the artifacts on
  // their own): the whole run, page after page. Artifacts that come with an events page are
  // the first page again and are left out.
  async function getRunAll(id) {
    const view = await call('Runs/GetRun', { runId: id });
    const total = Number((view.run && view.run.seq) || 0);
    let page = view;
    while ((page.events || []).length > 0) {
      const last = page.events[page.events.length - 1].seq;
      if (Number(last) >= total) break;
      page = await call('Runs/GetRun', { runId: id, afterSeq: String(last) });
      view.events = (view.events || []).concat(page.events || []);
      view.deliveries = (view.deliveries || []).concat(page.deliveries || []);
    }
    let next = view.artifactsNext;
    while (next && next !== '0') {
      page = await call('Runs/GetRun', { runId: id, afterSeq: String(total), artifactsAfter: next });
      view.artifacts = (view.artifacts || []).concat(page.artifacts || []);
      next = page.artifactsNext;
    }
    return view;
  }

  async function openRun(id) {
    stopFollowing();
    if (currentRun !== id) actionOut = null;
    currentRun = id;
    for (const b of document.querySelectorAll('#runs button')) {
      b.classList.toggle('current', b.getAttribute('data-run') === id);
    }
    const view = await getRunAll(id);
    if (currentRun !== id) return;
    renderRun(view);
    const s = view.run && view.run.status;
    if (['running', 'created', 'queued', 'recovering', 'pending_approval'].includes(s)) {
      say('Following run ' + id + '…');
      followTimer = setTimeout(() => openRun(id).then(loadRuns).catch((e) => say(failure(e))), 1000);
    } else {
      say('');
    }
  }

  function parseDetail(text) {
    if (!text || text[0] !== '{') return null;
    try {
      return JSON.parse(text);
    } catch (e) {
      return null;
    }
  }

  function ts(t) {
    return t ? new Date(t * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '';
  }

  function renderRun(view) {
    const run = view.run || {};
    const root = $('run');
    root.replaceChildren();
    const arts = new Map((view.artifacts || []).map((a) => [a.id, a]));
    const head = el('section', { class: 'card', id: 'run-head' },
      el('h2', {}, 'Run ', el('span', { class: 'mono', text: run.id }), ' ', badge(run.status || '?')),
      el('p', { text: run.task || '' }),
      el('p', { class: 'muted' }, 'mode ' + (run.mode || '?') + ' · ' + (run.seq || 0) +
        ' events · created ' + ts(run.createdAt) + ' · workflow ',
        el('span', { class: 'mono', text: (run.workflow || '').slice(0, 12) })));
    root.append(head);
    if (role === 'operator') head.append(renderOperatorActions(run));

    const decisions = el('section', { class: 'card', id: 'decisions' }, el('h2', { text: 'Decisions' }));
    let n = 0;
    for (const ev of view.events || []) {
      if (ev.kind !== 'input_checked' && ev.kind !== 'delivery_decided') continue;
      decisions.append(renderDecision(run, ev, arts));
      n++;
    }
    if (!n) decisions.append(el('p', { class: 'muted', text: 'No gate decisions yet.' }));
    root.append(decisions);
    root.append(renderDeliveries(run, view.deliveries || []));
    if ((view.approvals || []).length) root.append(renderApprovals(run, view.approvals));
    root.append(renderTimeline(view.events || []));
    root.append(renderArtifacts(view.artifacts || []));
  }

  function renderOperatorActions(run) {
    if (!actionOut) actionOut = el('div', { class: 'result', id: 'action-result', hidden: true });
    const out = actionOut;
    const show = (...nodes) => {
      out.hidden = false;
      out.replaceChildren(...nodes);
    };
    const wrap = (fn) => async (o) => {
      o.hidden = false;
      await fn();
    };
    const recover = wrap(async () => {
      const r = await call('Runs/RecoverRun', { runId: run.id });
      if (!r.decision) {
        // Queued on an executor and not ended within the call: no decision to show yet.
        show(el('div', { text: 'Recovery of run ' + run.id + ' is ' + ((r.run && r.run.status) || 'queued') +
          ' on an executor: follow the run' }));
        await openRun(run.id);
        await loadRuns();
        return;
      }
      const d = r.decision;
      show(el('div', {}, 'Recovery ', r.step ? 'step ' + r.step + ' → ' + (r.recipient || '?') + ': ' : '',
        badge(d.outcome || 'UNKNOWN'), ' ', (d.codes || []).map((c) => el('span', { class: 'code', text: c })),
        r.acknowledged ? ' (acknowledged: already delivered)' : ''),
        d.witness ? el('div', { class: 'witness', text: d.witness }) : null);
      await openRun(run.id);
      await loadRuns();
    });
    const reasonInput = el('input', { type: 'text', value: '', placeholder: 'reason', 'aria-label': 'cancel reason', id: 'cancel-reason' });
    const cancel = wrap(async () => {
      const r = await call('Runs/CancelRun', { runId: run.id, reason: reasonInput.value.trim() || 'cancelled from the console' });
      show(el('div', { text: 'Run ' + r.id + ' is ' + r.status +
        (r.status === 'cancelled' ? ' (' + (r.cancelReason || '') + ')' :
          ['completed', 'budget_exhausted'].includes(r.status) ? ': it had already ended, nothing was cancelled' :
            ': cancel requested, its executor stops it at its next check') }));
      await openRun(run.id);
      await loadRuns();
    });
    const audit = wrap(async () => {
      const r = await call('Evidence/AuditRun', { runId: run.id });
      show(el('div', {}, 'Audit: ', badge(r.intact ? 'ALLOW' : 'DENY'), ' ',
        r.intact ? 'event chain intact' : 'event chain broken at seq ' + (r.firstBadSeq || '?'),
        ' · ' + (r.events || 0) + ' events · ' + (r.keyed ? 'sealed with the integrity key' : 'hashes only (no integrity key)')),
        r.problem ? el('div', { class: 'error', text: r.problem }) : null);
    });
    const grantInput = el('input', { type: 'text', value: 'g_reporter', 'aria-label': 'grant', id: 'grant-id' });
    const revoke = wrap(async () => {
      const g = await call('Grants/RevokeGrant', { grantId: grantInput.value.trim() });
      show(el('div', { text: 'Revoked ' + g.id + (g.revokedAt ? ' at ' + ts(g.revokedAt) : '') }));
    });
    const restore = wrap(async () => {
      const r = await call('Grants/RestoreGrants', { grantId: grantInput.value.trim() });
      show(el('div', { text: 'Restored: ' + ((r.restored || []).join(', ') || 'nothing was revoked') }));
    });
    const file = el('input', { type: 'file', accept: '.json,application/json', 'aria-label': 'workflow file', id: 'whatif-file' });
    const whatif = wrap(async () => {
      const f = file.files && file.files[0];
      if (!f) throw new Error('choose a workflow file first');
      const bytes = new Uint8Array(await f.arrayBuffer());
      let bin = '';
      for (let i = 0; i < bytes.length; i += 0x8000) bin += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
      const r = await call('Evidence/WhatIf', { workflow: btoa(bin), runId: run.id });
      show(renderWhatIf(r));
    });
    const box = el('div', {},
      el('div', { class: 'actions' },
        action('Recover', recover, out),
        action('Audit run', audit, out, 'quiet'),
        el('label', { for: 'cancel-reason', text: 'Cancel' }), reasonInput,
        action('Cancel run', cancel, out, 'danger'),
        action('Refresh', async () => openRun(run.id), null, 'quiet')),
      el('div', { class: 'actions' }, el('label', { for: 'grant-id', text: 'Grant' }), grantInput,
        scriptedOnly ? el('span', { class: 'muted', text: 'grant controls are off on this server' }) : [
          action('Revoke', revoke, out, 'danger'), action('Restore', restore, out, 'quiet')]),
      el('div', { class: 'actions' }, el('label', { for: 'whatif-file', text: 'What if' }), file,
        action('Compare decisions', whatif, out, 'quiet')),
      out);
    return box;
  }

  function renderWhatIf(r) {
    const rows = (r.changes || []).map((c) => el('tr', {},
      el('td', { text: c.seq || '' }), el('td', { text: c.gate || '' }), el('td', { text: c.step || '' }),
      el('td', {}, badge((c.recorded || {}).outcome || '?')), el('td', {}, badge((c.candidate || {}).outcome || '?')),
      el('td', { text: c.change || '' })));
    return el('div', {},
      el('div', { text: 'What if (workflow ' + (r.workflowVersion || '').slice(0, 12) + '): ' +
        (r.examined || 0) + ' decisions examined, ' + (r.changes || []).length + ' would change' +
        (r.noSnapshot ? ', ' + r.noSnapshot + ' without a snapshot' : '') + (r.truncated ? ' (truncated)' : '') }),
      rows.length ? el('table', {}, el('tr', {}, ['seq', 'gate', 'step', 'recorded', 'candidate', 'change']
        .map((h) => el('th', { text: h }))), rows) : null);
  }

  /* --- a decision and its lineage ---------------------------------------------------------- */

  function renderDecision(run, ev, arts) {
    const d = parseDetail(ev.detail) || {};
    const outcome = ev.outcome || 'UNKNOWN';
    const gate = ev.kind === 'input_checked' ? 'input gate' : 'delivery gate';
    const what = ev.kind === 'input_checked'
      ? 'inputs of step ' + (d.step || '?')
      : 'send of ' + (d.payload || '?') + ' to ' + (d.recipient || '?') + ' by step ' + (d.step || '?');
    const out = el('div', { class: 'result', hidden: true });
    const box = el('article', { class: 'decision ' + outcome, 'data-seq': ev.seq, 'data-kind': ev.kind },
      el('div', {}, el('span', { class: 'mono', text: '#' + ev.seq + ' ' }), badge(outcome), ' ', gate, ': ', what,
        ' ', (ev.codes || []).map((c) => el('span', { class: 'code', text: c }))),
      ev.witness ? el('div', { class: 'witness', text: ev.witness }) : null,
      drawLineage(ev, d, arts));
    if (role === 'operator') {
      box.append(el('div', { class: 'actions' }, action('Replay', async (o) => {
        o.hidden = false;
        const r = await call('Evidence/ReplayDecision', { runId: run.id, seq: String(ev.seq) });
        if (r.noSnapshot) {
          o.replaceChildren(el('span', { class: 'muted', text: 'No snapshot: this decision failed operationally and cannot be replayed.' }));
          return;
        }
        o.replaceChildren(el('div', {}, 'Replayed: ', badge((r.replayed || {}).outcome || '?'), ' ',
          ((r.replayed || {}).codes || []).map((c) => el('span', { class: 'code', text: c })),
          r.matches ? ' — matches the recorded decision' : ' — differs from the recorded ' + ((r.recorded || {}).outcome || '?')));
      }, out, 'quiet')), out);
    }
    return box;
  }

  /* The decision's subjects' ancestry as columns: resources, then artifacts by depth, then
   * the step. The witness names the offending resource first: every edge on a path from it
   * to a subject is red, and the subject's edge into the step (what was refused) is dashed. */
  function drawLineage(ev, d, arts) {
    const subjects = ev.kind === 'input_checked' ? (d.artifacts || []) : (d.payload ? [d.payload] : []);
    if (!subjects.length) return null;
    const nodes = new Map();
    const edges = [];
    const depth = new Map();
    const visit = (id, seen) => {
      if (depth.has(id)) return depth.get(id);
      if (seen.has(id)) return 1;
      seen.add(id);
      const a = arts.get(id);
      let dp = 1;
      if (a) {
        for (const p of a.parents || []) {
          dp = Math.max(dp, visit(p, seen) + 1);
          edges.push({ from: 'a:' + p, to: 'a:' + id });
        }
        for (const r of a.resources || []) {
          if (!nodes.has('r:' + r)) nodes.set('r:' + r, { id: 'r:' + r, col: 0, label: r, sub: 'resource', cls: 'resource' });
          edges.push({ from: 'r:' + r, to: 'a:' + id });
        }
      }
      depth.set(id, dp);
      nodes.set('a:' + id, { id: 'a:' + id, col: dp, label: a ? (a.title || id) : id,
        sub: id + (a ? ' · ' + (a.kind || '') + ' · ' + (CONF[a.conf || 0] || '?') : ' · unknown'),
        cls: 'c' + (a ? (a.conf || 0) : 0) });
      return dp;
    };
    for (const s of subjects) visit(s, new Set());
    // Resources take the colour of their sources' labels.
    for (const e of edges) {
      if (e.from.startsWith('r:')) {
        const n = nodes.get(e.from);
        const a = nodes.get(e.to);
        if (n && a && !n.cls.includes(' c')) n.cls += ' ' + a.cls;
      }
    }
    const maxCol = Math.max(...Array.from(nodes.values()).map((n) => n.col));
    const stepLabel = ev.kind === 'input_checked' ? (d.step || '?') + ' step' : (d.step || '?') + ' → ' + (d.recipient || '?');
    nodes.set('step', { id: 'step', col: maxCol + 1, label: stepLabel, sub: ev.kind === 'input_checked' ? 'model request' : (d.tool || 'delivery'), cls: 'step' });
    for (const s of subjects) edges.push({ from: 'a:' + s, to: 'step', last: true });

    // The witness path: from the offending resource to the subjects.
    const parts = (ev.witness || '').split(' → ');
    const bad = parts.length > 1 ? 'r:' + parts[0].replace(/ \(.*\)$/, '') : null;
    const hot = new Set();
    if (bad && nodes.has(bad) && ev.outcome !== 'ALLOW') {
      const fwd = new Set([bad]);
      let grew = true;
      while (grew) {
        grew = false;
        for (const e of edges) if (fwd.has(e.from) && !fwd.has(e.to)) { fwd.add(e.to); grew = true; }
      }
      const back = new Set(['step']);
      grew = true;
      while (grew) {
        grew = false;
        for (const e of edges) if (back.has(e.to) && !back.has(e.from)) { back.add(e.from); grew = true; }
      }
      for (const id of fwd) if (back.has(id)) hot.add(id);
    }

    const W = 168, H = 40, GX = 46, GY = 14, PAD = 10;
    const cols = [];
    for (const n of nodes.values()) (cols[n.col] = cols[n.col] || []).push(n);
    let rows = 0;
    cols.forEach((c) => { if (c) rows = Math.max(rows, c.length); });
    const height = PAD * 2 + rows * (H + GY) - GY;
    cols.forEach((c, i) => {
      if (!c) return;
      const off = (height - (c.length * (H + GY) - GY)) / 2;
      c.forEach((n, k) => { n.x = PAD + i * (W + GX); n.y = off + k * (H + GY); });
    });
    const width = PAD * 2 + (maxCol + 2) * (W + GX) - GX;
    const g = svg('svg', { class: 'lineage', viewBox: '0 0 ' + width + ' ' + height, width, height,
      role: 'img', 'aria-label': 'lineage of decision ' + ev.seq });
    g.append(svg('title', { text: 'Lineage of decision #' + ev.seq + (ev.witness ? ': ' + ev.witness : '') }));
    const seen = new Set();
    for (const e of edges) {
      const key = e.from + '>' + e.to;
      if (seen.has(key)) continue;
      seen.add(key);
      const a = nodes.get(e.from), b = nodes.get(e.to);
      if (!a || !b) continue;
      const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2, mx = (x1 + x2) / 2;
      let cls = '';
      if (hot.has(e.from) && hot.has(e.to)) cls = e.last ? 'offending' : 'hot';
      else if (e.last && ev.outcome === 'ALLOW') cls = 'allowed';
      else if (e.last && ev.outcome !== 'ALLOW' && !hot.size) cls = 'offending';
      g.append(svg('path', { d: `M${x1},${y1} C${mx},${y1} ${mx},${y2} ${x2},${y2}`, class: cls,
        'data-edge': key }));
    }
    for (const n of nodes.values()) {
      const grp = svg('g', { class: 'node ' + n.cls + (hot.has(n.id) ? ' hot' : ''), 'data-node': n.id });
      grp.append(svg('rect', { x: n.x, y: n.y, width: W, height: H, rx: 5 }));
      grp.append(svg('text', { x: n.x + 8, y: n.y + 16, text: clip(n.label, 24) }));
      grp.append(svg('text', { x: n.x + 8, y: n.y + 31, class: 'sub', text: clip(n.sub, 30) }));
      g.append(grp);
    }
    return el('div', {}, g, el('div', { class: 'legend',
      text: 'sources → derived artifacts → ' + (ev.kind === 'input_checked' ? 'the step' : 'the send') +
        (hot.size ? '; red: the witness path, dashed: the refused edge' : '') }));
  }

  function clip(s, n) {
    s = String(s || '');
    return s.length > n ? s.slice(0, n - 1) + '…' : s;
  }

  /* --- deliveries, timeline, artifacts ----------------------------------------------------- */

  function renderDeliveries(run, deliveries) {
    const sec = el('section', { class: 'card', id: 'deliveries' }, el('h2', { text: 'Deliveries and receipts' }));
    if (!deliveries.length) {
      sec.append(el('p', { class: 'muted', text: 'Nothing delivered yet.' }));
      return sec;
    }
    const t = el('table', {}, el('tr', {}, ['invocation', 'to', 'tool', 'payload', 'grant chain', 'committed', 'content', '']
      .map((h) => el('th', { text: h }))));
    for (const dl of deliveries) {
      const out = el('div', { class: 'mono', hidden: true });
      const receipt = action('Receipt', async (o) => {
        o.hidden = false;
        const r = await call('Evidence/GetReceipt', { runId: run.id, invocationId: dl.invocationId });
        o.replaceChildren(el('div', { text: r.kind + ' · ' + r.status + ' · ' + r.time + ' · chain ' + (r.grantChain || []).join(' → ') }),
          el('div', { text: 'mac ' + (r.mac || '') }));
      }, out, 'quiet');
      t.append(el('tr', { 'data-invocation': dl.invocationId },
        el('td', { class: 'mono', text: dl.invocationId }), el('td', { text: dl.recipient }), el('td', { text: dl.tool }),
        el('td', { class: 'mono', text: dl.payloadId + ' ' + (dl.payloadHash || '').slice(0, 12) }),
        el('td', { text: (dl.grantChain || []).join(' → ') }), el('td', { text: ts(dl.committedAt) }),
        el('td', {}, dl.redacted ? el('span', { class: 'muted', text: '(redacted)' }) : el('pre', { class: 'content', text: dl.content || '' })),
        el('td', {}, receipt, out)));
    }
    sec.append(t);
    return sec;
  }

  /* Human approvals of the run. An operator decides a pending one on behalf of the human the
   * workflow names (charterd refuses any other actor); a viewer only sees them. */
  function renderApprovals(run, approvals) {
    const sec = el('section', { class: 'card', id: 'approvals' }, el('h2', { text: 'Approvals' }));
    const t = el('table', {}, el('tr', {}, ['approval', 'state', 'approver', 'send', 'invocation', 'deadline / decided', '']
      .map((h) => el('th', { text: h }))));
    for (const a of approvals) {
      const out = el('div', { class: 'result', hidden: true });
      const decide = (decision) => async (o) => {
        o.hidden = false;
        const r = await call('Approvals/DecideApproval', { approvalId: a.id, decision, actor: a.approver });
        const d = r.decision || {};
        o.replaceChildren(el('div', {}, badge(d.outcome || 'UNKNOWN'), ' ',
          (d.codes || []).map((c) => el('span', { class: 'code', text: c })), ' ', (r.approval || {}).state || ''));
        await openRun(run.id);
      };
      const decided = a.decidedBy ? ts(a.decidedAt) + ' by ' + a.decidedBy : 'until ' + ts(a.deadline);
      const actions = role === 'operator' && a.state === 'pending'
        ? [action('Approve as ' + a.approver, decide('approve'), out), action('Deny as ' + a.approver, decide('deny'), out, 'danger')]
        : [];
      t.append(el('tr', { 'data-approval': a.id, 'data-state': a.state },
        el('td', { class: 'mono', text: a.id }), el('td', {}, badge(a.state)), el('td', { text: a.approver }),
        el('td', { text: a.tool + ' ' + a.payloadId + ' → ' + a.recipient }),
        el('td', { class: 'mono', text: a.invocationId }),
        el('td', {}, decided, a.reason ? el('div', { class: 'muted', text: a.reason }) : null),
        el('td', {}, ...actions, out)));
    }
    sec.append(t);
    return sec;
  }

  function renderTimeline(events) {
    const ol = el('ol', { class: 'timeline' });
    for (const ev of events) {
      ol.append(el('li', { class: ev.outcome || '' },
        el('span', { class: 'seq', text: String(ev.seq).padStart(3, ' ') }),
        el('strong', { text: ev.kind }), ' ', ev.outcome ? badge(ev.outcome) : null, ' ',
        (ev.codes || []).map((c) => el('span', { class: 'code', text: c })),
        el('span', { class: 'muted', text: ' ' + ts(ev.ts) }),
        ev.detail ? el('div', { class: 'detail', text: ev.detail }) : null));
    }
    return el('section', { class: 'card', id: 'timeline' }, el('h2', { text: 'Events' }), ol);
  }

  function renderArtifacts(artifacts) {
    const t = el('table', {}, el('tr', {}, ['id', 'kind', 'title', 'label', 'step', 'from', 'hash', 'content']
      .map((h) => el('th', { text: h }))));
    for (const a of artifacts) {
      t.append(el('tr', {},
        el('td', { class: 'mono', text: a.id }), el('td', { text: a.kind }), el('td', { text: a.title || '' }),
        el('td', { text: (CONF[a.conf || 0] || '?') + ((a.integrity || 0) ? ', trusted' : ', untrusted') }),
        el('td', { text: a.step || '' }),
        el('td', { class: 'mono', text: (a.parents || a.resources || []).join(', ') }),
        el('td', { class: 'mono', text: (a.hash || '').slice(0, 12) }),
        el('td', {}, a.redacted ? el('span', { class: 'muted', text: '(redacted)' }) : el('pre', { class: 'content', text: a.content || '' }))));
    }
    return el('section', { class: 'card', id: 'artifacts' }, el('h2', { text: 'Artifacts' }), t);
  }

  /* --- start ------------------------------------------------------------------------------- */

  document.addEventListener('DOMContentLoaded', () => {
    $('signin-form').addEventListener('submit', (ev) => { signIn(ev).catch((e) => say(failure(e))); });
    $('signout').addEventListener('click', signOut);
    $('refresh-runs').addEventListener('click', () => loadRuns().catch((e) => say(failure(e))));
  });
})();
