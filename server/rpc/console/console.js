/*
 * console.js - charter's operator console: the runs of the graph (workflow, task, age and
 * status, filtered and searched), the pending approvals and recent refusals at a glance, each
 * run's events, decisions (codes, witness and the lineage they were decided on, drawn as SVG),
 * deliveries and receipts, and the operator's actions, all through the Connect JSON API of the
 * same server.
 *
 * The token lives in one variable of this closure: never in the URL, a cookie or storage, so
 * a reload signs out. The address's fragment names what is shown (#run=ID, &decision=SEQ or
 * &approval=ID), so a reload or a shared link opens the same run and decision once signed in.
 * Every text from the server is placed with textContent (an artifact can carry a prompt
 * injection; none of it is ever parsed as HTML). The role the server reports for the token
 * (Health/Check) decides which actions are shown; the server refuses anything a viewer sends
 * anyway.
 */
(function () {
  'use strict';

  let token = null;
  let role = '';
  let scriptedOnly = false;
  let currentRun = null;
  let followTimer = null;
  let actionOut = null; /* the result box of the run's actions: kept across re-renders */
  let runs = []; /* the last ListRuns answer, newest first */
  let focus = null; /* {run, decision, approval} the address names; scrolled to once */
  const workflows = new Map(); /* version -> WorkflowInfo */
  const refusalsOf = new Map(); /* run id -> {seq, refusals}: decision events only grow */
  const stepGrants = new Map(); /* workflow version -> [{step, grant}] */
  const grantChoice = new Map(); /* run id -> the grant the operator picked */

  const $ = (id) => document.getElementById(id);
  const SVGNS = 'http://www.w3.org/2000/svg';
  const CONF = ['public', 'internal', 'confidential'];
  const GLANCE = 4; /* entries of each list on the first screen, until "Show all" */
  const GLANCE_MAX = 50; /* entries of each list at most */
  const expanded = { 'pending-list': false, 'refusals-list': false };
  const RUNS_SCANNED = 30; /* the newest runs whose refusals are gathered */
  const ACTIVE = ['running', 'created', 'queued', 'recovering', 'pending_approval'];

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
    await route();
  }

  function signOut() {
    token = null;
    role = '';
    currentRun = null;
    runs = [];
    stopFollowing();
    workflows.clear();
    refusalsOf.clear();
    stepGrants.clear();
    grantChoice.clear();
    for (const id of ['run', 'runs', 'run-actions', 'pending-list', 'refusals-list']) $(id).replaceChildren();
    for (const id of ['who', 'server', 'runs-count', 'pending-count', 'refusals-count']) $(id).textContent = '';
    $('signout').hidden = true;
    $('app').hidden = true;
    $('signin').hidden = false;
    say('');
  }

  /* --- the address: #run=ID&decision=SEQ or #run=ID&approval=ID ---------------------------- */

  function linkTo(run, extra) {
    const p = new URLSearchParams({ run });
    for (const [k, v] of Object.entries(extra || {})) if (v) p.set(k, String(v));
    return '#' + p.toString();
  }

  function readAddress() {
    const p = new URLSearchParams(location.hash.replace(/^#/, ''));
    const run = p.get('run');
    return run ? { run, decision: p.get('decision'), approval: p.get('approval') } : null;
  }

  /* Opens what the address names (after sign-in, a followed link, back and forward). */
  async function route() {
    if (!token) return;
    focus = readAddress();
    if (focus) await openRun(focus.run);
  }

  /* Opening a run from the list names it in the address, as a new history entry. */
  function visit(id) {
    const to = linkTo(id);
    if (location.hash !== to) history.pushState(null, '', to);
    focus = { run: id };
    openRun(id).catch((e) => say(failure(e)));
  }

  /* --- workflows and the run list ---------------------------------------------------------- */

  async function loadWorkflows() {
    const r = await call('Workflows/ListWorkflows', {});
    workflows.clear();
    for (const w of r.workflows || []) workflows.set(w.version, w);
  }

  function workflowName(version) {
    const w = workflows.get(version || '');
    return w ? w.name : (version ? version.slice(0, 12) : '?');
  }

  /* Seconds since the epoch from an API time: a number, or an RFC 3339 text. */
  function epoch(t) {
    if (typeof t === 'number') return t;
    if (typeof t === 'string' && t) {
      const n = Number(t);
      if (Number.isFinite(n)) return n;
      const ms = Date.parse(t);
      if (Number.isFinite(ms)) return ms / 1000;
    }
    return 0;
  }

  function ts(t) {
    const s = epoch(t);
    return s ? new Date(s * 1000).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC') : '';
  }

  function ago(t) {
    const s = epoch(t);
    if (!s) return '';
    const d = Math.max(0, Date.now() / 1000 - s);
    if (d < 45) return 'just now';
    if (d < 5400) return Math.round(d / 60) + ' min ago';
    if (d < 129600) return Math.round(d / 3600) + ' h ago';
    return Math.round(d / 86400) + ' d ago';
  }

  function renderRunActions() {
    const box = $('run-actions');
    box.replaceChildren();
    if (role !== 'operator') {
      box.append(el('p', { class: 'muted', text: 'Read-only: confidential content is redacted.' }));
      return;
    }
    const out = el('div', { class: 'muted' });
    const pick = el('select', { id: 'start-workflow', 'aria-label': 'workflow to start' });
    fillStartWorkflows(pick);
    const task = el('input', { type: 'text', id: 'start-task', 'aria-label': 'task', autocomplete: 'off',
      placeholder: "task (default: the workflow's)" });
    pick.addEventListener('change', () => {
      const w = workflows.get(pick.value);
      task.placeholder = w && w.task ? w.task : "task (default: the workflow's)";
    });
    const start = (mode) => async () => {
      const body = { mode };
      if (pick.value) body.workflow = pick.value;
      if (task.value.trim()) body.task = task.value.trim();
      say('Starting a ' + mode + ' run of ' + (pick.value ? workflowName(pick.value) : "the server's workflow") + '…');
      const v = await call('Runs/CreateRun', body);
      task.value = '';
      out.replaceChildren();
      say('');
      await loadRuns();
      visit(v.run.id);
    };
    const row = el('div', { class: 'actions' }, action('Start scripted run', start('scripted'), out));
    if (!scriptedOnly) row.append(action('Start live run', start('live'), out, 'quiet'));
    box.append(el('div', { class: 'start' }, el('label', { for: 'start-workflow', text: 'Start' }), pick,
      el('label', { for: 'start-task', text: 'Task' }), task), row, out);
  }

  /* The stored workflows a run can be started from, newest first; the choice is kept. */
  function fillStartWorkflows(pick) {
    if (!pick) return;
    const keep = pick.value;
    pick.replaceChildren(el('option', { value: '', text: "the server's workflow" }),
      ...[...workflows.values()].reverse().map((w) => el('option', { value: w.version, title: w.task || '',
        text: w.name + ' · ' + w.version.slice(0, 8) + ' · ' + (w.steps || []).length + ' steps' })));
    pick.value = workflows.has(keep) ? keep : '';
  }

  async function loadRuns() {
    const [r] = await Promise.all([call('Runs/ListRuns', { limit: 200 }), loadWorkflows()]);
    runs = r.runs || [];
    fillStartWorkflows($('start-workflow'));
    fillFilter($('filter-status'), runs.map((x) => x.status || '?'));
    fillFilter($('filter-workflow'), runs.map((x) => workflowName(x.workflow)));
    renderRunList();
    await loadGlance();
  }

  /* The options of a filter: every value the runs have, the current choice kept. */
  function fillFilter(sel, values) {
    const keep = sel.value;
    const all = [...new Set(values.concat(keep ? [keep] : []))].sort();
    sel.replaceChildren(sel.options[0], ...all.map((v) => el('option', { value: v, text: v })));
    sel.value = keep;
  }

  function matches(run, status, wf, words) {
    if (status && run.status !== status) return false;
    const name = workflowName(run.workflow);
    if (wf && name !== wf) return false;
    const hay = [run.id, run.task, name, run.workflow, run.status, run.mode].join(' ').toLowerCase();
    return words.every((w) => hay.includes(w));
  }

  function renderRunList() {
    const status = $('filter-status').value;
    const wf = $('filter-workflow').value;
    const words = $('run-search').value.toLowerCase().split(/\s+/).filter(Boolean);
    const shown = runs.filter((r) => matches(r, status, wf, words));
    const list = $('runs');
    list.replaceChildren();
    for (const run of shown) {
      const b = el('button', { type: 'button', 'data-run': run.id, title: run.id,
        class: currentRun === run.id ? 'current' : null, onclick: () => visit(run.id) },
        el('span', { class: 'line' }, el('strong', { class: 'wf', title: workflowName(run.workflow), text: workflowName(run.workflow) }),
          el('span', { class: 'age muted', title: ts(run.createdAt), text: ago(run.createdAt) }),
          badge(run.status || '?')),
        el('span', { class: 'line' }, el('span', { class: 'task', text: run.task || '(no task)' }),
          el('span', { class: 'rid', text: run.id })));
      list.append(el('li', {}, b));
    }
    if (!shown.length) {
      list.append(el('li', { class: 'muted', text: runs.length ? 'No run matches.' : 'No runs yet.' }));
    }
    const of = runs.length + (runs.length === 1 ? ' run' : ' runs');
    $('runs-count').textContent = shown.length === runs.length ? of : shown.length + ' of ' + of;
  }

  /* --- at a glance: pending approvals and recent refusals ---------------------------------- */

  async function loadGlance() {
    const [p, f] = await Promise.allSettled([loadPending(), loadRefusals()]);
    for (const [r, id] of [[p, 'pending-list'], [f, 'refusals-list']]) {
      if (r.status === 'rejected') $(id).replaceChildren(el('li', { class: 'error', text: failure(r.reason) }));
    }
  }

  async function loadPending() {
    const r = await call('Approvals/ListApprovals', { state: 'pending', limit: GLANCE_MAX });
    const all = r.approvals || [];
    showGlance('pending-list', all.map((a) => el('li', { 'data-approval': a.id, 'data-run': a.runId },
      el('a', { href: linkTo(a.runId, { approval: a.id }) },
        el('span', { class: 'line' }, badge('pending'), el('span', { class: 'what' }, el('strong', { text: a.approver }),
          ' to decide ' + (a.tool || '') + ' ' + (a.payloadId || '') + ' → ' + (a.recipient || '')),
          el('span', { class: 'age muted', text: 'until ' + ts(a.deadline) })),
        el('span', { class: 'line sub muted', text: 'run ' + a.runId + ' · step ' + (a.step || '?') +
          ' · asked ' + ago(a.requestedAt) })))), 'Nothing waits for a human.');
    $('pending-count').textContent = String(all.length);
  }

  /* Fills a list of the first screen: GLANCE entries, and a button for the rest. */
  function showGlance(id, items, none) {
    const list = $(id);
    const open = expanded[id] || items.length <= GLANCE;
    list.classList.toggle('all', open && items.length > GLANCE);
    list.replaceChildren(...(open ? items : items.slice(0, GLANCE)));
    if (!items.length) list.append(el('li', { class: 'muted', text: none }));
    if (items.length > GLANCE) {
      list.append(el('li', { class: 'more' }, el('button', { type: 'button', class: 'quiet small',
        text: expanded[id] ? 'Show fewer' : 'Show all ' + items.length,
        onclick: () => {
          expanded[id] = !expanded[id];
          showGlance(id, items, none);
        } })));
    }
  }

  /* The refused decisions (DENY or UNKNOWN) of the newest runs, newest first. A run's events
   * are only appended, so each run is read once and then only past the last seq seen; a send
   * held for approval is listed with the pending approvals, not here. */
  async function loadRefusals() {
    const scan = runs.slice(0, RUNS_SCANNED);
    const stale = scan.filter((r) => Number(r.seq || 0) > ((refusalsOf.get(r.id) || {}).seq || 0));
    for (let i = 0; i < stale.length; i += 4) {
      await Promise.all(stale.slice(i, i + 4).map(readRefusals));
    }
    const all = [];
    for (const r of scan) for (const d of (refusalsOf.get(r.id) || {}).refusals || []) all.push({ run: r, ev: d });
    all.sort((a, b) => epoch(b.ev.ts) - epoch(a.ev.ts));
    showGlance('refusals-list', all.slice(0, GLANCE_MAX).map(({ run, ev }) => {
      const d = parseDetail(ev.detail) || {};
      return el('li', { 'data-run': run.id, 'data-seq': ev.seq },
        el('a', { href: linkTo(run.id, { decision: ev.seq }) },
          el('span', { class: 'line' }, badge(ev.outcome || 'UNKNOWN'), el('span', { class: 'what', text: decisionWhat(ev, d) }),
            (ev.codes || []).map((c) => el('span', { class: 'code', text: c })),
            el('span', { class: 'age muted', text: ago(ev.ts) })),
          el('span', { class: 'line sub muted', text: workflowName(run.workflow) + ' · run ' + run.id + ' #' + ev.seq +
            (ev.witness ? ' · ' + ev.witness : '') })));
    }), 'No refusals in the newest ' + scan.length + ' runs.');
    $('refusals-count').textContent = all.length > GLANCE_MAX ? GLANCE_MAX + ' of ' + all.length : String(all.length);
  }

  async function readRefusals(run) {
    const known = refusalsOf.get(run.id) || { seq: 0, refusals: [] };
    let seq = known.seq;
    const found = known.refusals.slice();
    for (;;) {
      const v = await call('Runs/GetRun', { runId: run.id, afterSeq: String(seq), limit: 1000, withoutContent: true });
      const evs = v.events || [];
      for (const ev of evs) {
        seq = Math.max(seq, Number(ev.seq));
        if (isRefusal(ev)) found.push(ev);
      }
      if (evs.length < 1000) break;
    }
    refusalsOf.set(run.id, { seq, refusals: found });
  }

  const GATES = { input_checked: 'input gate', delivery_decided: 'delivery gate', invoke_decided: 'tool gate' };

  function isRefusal(ev) {
    if (!GATES[ev.kind]) return false;
    if (ev.outcome !== 'DENY' && ev.outcome !== 'UNKNOWN') return false;
    return !((ev.codes || []).length === 1 && ev.codes[0] === 'APPROVAL_PENDING');
  }

  function decisionWhat(ev, d) {
    return GATES[ev.kind] + ': ' + decisionSubject(ev, d);
  }

  function decisionSubject(ev, d) {
    if (ev.kind === 'input_checked') return 'inputs of step ' + (d.step || '?');
    if (ev.kind === 'invoke_decided') {
      return 'call of ' + (d.tool || '?') + (d.destination ? ' to ' + d.destination : '') + ' by step ' + (d.step || '?');
    }
    return 'send of ' + (d.payload || '?') + ' to ' + (d.recipient || '?') + ' by step ' + (d.step || '?');
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
    if (ACTIVE.includes(s)) {
      say('Following run ' + id + '…');
      followTimer = setTimeout(() => openRun(id).then(loadRuns).catch((e) => say(failure(e))), 1000);
    } else {
      say('');
    }
    showFocus(id);
  }

  /* Marks the decision or approval the address names, and scrolls to it the first time. */
  function showFocus(id) {
    if (!focus || focus.run !== id) return;
    let target = null;
    if (focus.decision) target = document.querySelector('#decisions article.decision[data-seq="' + CSS.escape(focus.decision) + '"]');
    if (focus.approval) target = document.querySelector('#approvals tr[data-approval="' + CSS.escape(focus.approval) + '"]');
    if ((focus.decision || focus.approval) && !target) {
      say('Run ' + id + ' has no ' + (focus.decision ? 'decision #' + focus.decision : 'approval ' + focus.approval) + '.');
    }
    if (target) {
      target.classList.add('target');
      if (!focus.shown) target.scrollIntoView({ block: 'center' });
    } else if (!focus.shown) {
      window.scrollTo(0, 0);
    }
    focus.shown = true;
  }

  function parseDetail(text) {
    if (!text || text[0] !== '{') return null;
    try {
      return JSON.parse(text);
    } catch (e) {
      return null;
    }
  }

  /* The refusal a run stopped at: its last DENY or UNKNOWN gate decision when it is blocked or
   * in error, or when no decision came after it. */
  function stoppedBy(run, events) {
    const decisions = events.filter((ev) => ev.kind === 'input_checked' || ev.kind === 'delivery_decided');
    const last = decisions[decisions.length - 1];
    const refused = decisions.filter(isRefusal);
    const r = refused[refused.length - 1];
    if (!r) return null;
    return ['blocked', 'error'].includes(run.status) || r === last ? r : null;
  }

  function renderRun(view) {
    const run = view.run || {};
    const root = $('run');
    root.replaceChildren();
    const arts = new Map((view.artifacts || []).map((a) => [a.id, a]));
    const events = view.events || [];
    const head = el('section', { class: 'card', id: 'run-head' },
      el('h2', {}, 'Run ', el('a', { class: 'mono', href: linkTo(run.id), text: run.id }), ' ', badge(run.status || '?'),
        ' ', el('span', { class: 'wf', text: workflowName(run.workflow) })),
      el('p', { class: 'task', text: run.task || '' }),
      el('p', { class: 'muted' }, 'mode ' + (run.mode || '?') + ' · ' + (run.seq || 0) +
        ' events · created ' + ts(run.createdAt) + ' (' + ago(run.createdAt) + ') · workflow ',
        el('span', { class: 'mono', text: (run.workflow || '').slice(0, 12) })));
    const stop = stoppedBy(run, events);
    if (stop) head.append(renderStop(run, stop));
    root.append(head);
    if (role === 'operator') head.append(renderOperatorActions(run, view, stop));

    const decisions = el('section', { class: 'card', id: 'decisions' }, el('h2', { text: 'Decisions' }));
    let n = 0;
    for (const ev of events) {
      if (!GATES[ev.kind]) continue;
      decisions.append(renderDecision(run, ev, arts));
      n++;
    }
    if (!n) decisions.append(el('p', { class: 'muted', text: 'No gate decisions yet.' }));
    root.append(decisions);
    root.append(renderDeliveries(run, view.deliveries || []));
    if ((view.approvals || []).length) root.append(renderApprovals(run, view.approvals));
    root.append(renderTimeline(events));
    root.append(renderArtifacts(view.artifacts || []));
  }

  /* The refusal that stopped the run, at the top of its page, linking to the decision. */
  function renderStop(run, ev) {
    const d = parseDetail(ev.detail) || {};
    return el('div', { class: 'stop ' + (ev.outcome || 'UNKNOWN'), id: 'run-stop', 'data-seq': ev.seq },
      el('div', {}, el('a', { href: linkTo(run.id, { decision: ev.seq }), text: 'Refused at #' + ev.seq }), ' ',
        badge(ev.outcome || 'UNKNOWN'), ' ', decisionWhat(ev, d), ' ',
        (ev.codes || []).map((c) => el('span', { class: 'code', text: c }))),
      ev.witness ? el('div', { class: 'witness', text: ev.witness }) : null);
  }

  /* --- the grants of a run's delegation chain ---------------------------------------------- */

  /* Each step of the run's workflow and the grant it acts under (the definition, which only an
   * operator may read; a version never changes, so it is read once). */
  async function workflowSteps(version) {
    if (stepGrants.has(version)) return stepGrants.get(version);
    const w = await call('Workflows/GetWorkflow', { workflow: version });
    const bytes = Uint8Array.from(atob(w.definition || ''), (ch) => ch.charCodeAt(0));
    const def = JSON.parse(new TextDecoder().decode(bytes));
    const steps = (def.steps || []).filter((s) => s && s.grant).map((s) => ({ step: String(s.name), grant: String(s.grant) }));
    stepGrants.set(version, steps);
    return steps;
  }

  /* The grants of the run's delegation chains: every step's grant, then the grants above them
   * (Grants/ShowChain, asked again each time so a revocation shows), and any grant a delivery
   * of the run was authorized by. */
  async function runGrants(run, view) {
    const steps = await workflowSteps(run.workflow);
    const out = new Map();
    const add = (id) => {
      if (!out.has(id)) out.set(id, { id, steps: [], root: false, revokedAt: 0 });
      return out.get(id);
    };
    for (const s of steps) add(s.grant).steps.push(s.step);
    const chains = await Promise.all([...new Set(steps.map((s) => s.grant))].map((g) =>
      call('Grants/ShowChain', { grantId: g })));
    for (const c of chains) {
      for (const g of c.grants || []) {
        const e = add(g.id);
        e.root = !!g.root;
        e.revokedAt = epoch(g.revokedAt);
      }
    }
    for (const dl of view.deliveries || []) for (const g of dl.grantChain || []) add(g);
    return [...out.values()];
  }

  function grantLabel(g) {
    return g.id + (g.steps.length ? ' · grant of ' + g.steps.join(', ') : ' · delegates') +
      (g.root ? ' · root' : '') + (g.revokedAt ? ' · revoked' : '');
  }

  /* A select of the run's grants; until they are read (its ready promise) it offers none. The
   * default is the grant of the step the run was refused at. */
  function grantPicker(run, view, stop) {
    const sel = el('select', { 'aria-label': 'grant', id: 'grant-id', 'data-ready': 'no' },
      el('option', { value: '', text: 'reading the delegation chain…' }));
    sel.addEventListener('change', () => grantChoice.set(run.id, sel.value));
    const stopStep = stop ? (parseDetail(stop.detail) || {}).step : null;
    sel.ready = runGrants(run, view).then((grants) => {
      const want = grantChoice.get(run.id) ||
        ((grants.find((g) => stopStep && g.steps.includes(stopStep)) || grants[0] || {}).id);
      sel.replaceChildren(...grants.map((g) => el('option', { value: g.id, text: grantLabel(g) })));
      if (!grants.length) sel.append(el('option', { value: '', text: 'no grant in this run' }));
      sel.value = want || '';
      sel.setAttribute('data-ready', 'yes');
    }).catch((e) => {
      sel.replaceChildren(el('option', { value: '', text: 'the chain could not be read: ' + failure(e) }));
      sel.setAttribute('data-ready', 'error');
    });
    return sel;
  }

  function renderOperatorActions(run, view, stop) {
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
    const grantInput = grantPicker(run, view, stop);
    const grant = async () => {
      await grantInput.ready;
      if (!grantInput.value) throw new Error('pick a grant of the run first');
      return grantInput.value;
    };
    const revoke = wrap(async () => {
      const g = await call('Grants/RevokeGrant', { grantId: await grant() });
      show(el('div', { text: 'Revoked ' + g.id + (g.revokedAt ? ' at ' + ts(g.revokedAt) : '') }));
    });
    const restore = wrap(async () => {
      const r = await call('Grants/RestoreGrants', { grantId: await grant() });
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
    const gate = GATES[ev.kind];
    const what = decisionSubject(ev, d);
    const out = el('div', { class: 'result', hidden: true });
    const box = el('article', { class: 'decision ' + outcome, 'data-seq': ev.seq, 'data-kind': ev.kind },
      el('div', {}, el('a', { class: 'mono permalink', href: linkTo(run.id, { decision: ev.seq }),
        title: 'a link to this decision', text: '#' + ev.seq }), ' ', badge(outcome), ' ', gate, ': ', what,
        ' ', (ev.codes || []).map((c) => el('span', { class: 'code', text: c }))),
      ev.witness ? el('div', { class: 'witness', text: ev.witness }) : null,
      ev.kind === 'invoke_decided' ? renderArguments(d, arts) : drawLineage(ev, d, arts));
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

  /* A tool call's arguments, read-only: each value (redacted for a viewer), where it came from,
   * and the sources its lineage reaches with their labels: what the tool gate decided from. */
  function renderArguments(d, arts) {
    const t = el('table', { class: 'arguments' }, el('tr', {}, ['argument', 'role', 'value', 'from', 'lineage']
      .map((h) => el('th', { text: h }))));
    for (const a of d.arguments || []) {
      const value = a.value_redacted ? el('span', { class: 'muted', text: '(redacted)' }) : el('span', { class: 'mono', text: a.value || '' });
      const from = a.from_task ? 'the task'
        : a.quoted_from ? 'quoted from ' + artifactName(a.quoted_from, arts) : 'written by the model';
      const lineage = a.from_task ? [el('div', { text: 'the human\'s task (trusted, public)' })]
        : (a.lineage || []).map((id) => el('div', { class: 'lineage' },
          el('span', { text: artifactName(id, arts) }), ' ← ', sourcesOf(id, arts).join(', ') || '?'));
      t.append(el('tr', { 'data-argument': a.name || '' },
        el('td', { class: 'mono', text: a.name || '' }), el('td', { text: a.role || '' }), el('td', {}, value),
        el('td', { text: from }), el('td', {}, ...lineage)));
    }
    return t;
  }

  function artifactName(id, arts) {
    const a = arts.get(id);
    return a ? (a.title || id) : id;
  }

  /* The sources an artifact derives from, each "resource (trusted|untrusted, confidentiality)". */
  function sourcesOf(id, arts) {
    const out = new Set();
    const seen = new Set();
    const walk = (x) => {
      if (seen.has(x)) return;
      seen.add(x);
      const a = arts.get(x);
      if (!a) return;
      if ((a.parents || []).length) {
        for (const p of a.parents) walk(p);
        return;
      }
      for (const r of a.resources || []) {
        out.add(r + ' (' + ((a.integrity || 0) ? 'trusted' : 'untrusted') + ', ' + (CONF[a.conf || 0] || '?') + ')');
      }
    };
    walk(id);
    return [...out].sort();
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
        await loadRuns();
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
    for (const id of ['run-search', 'filter-status', 'filter-workflow']) {
      $(id).addEventListener(id === 'run-search' ? 'input' : 'change', renderRunList);
    }
    window.addEventListener('hashchange', () => route().catch((e) => say(failure(e))));
  });
})();
