// The mail and payments MCP server of this suite, written with the official TypeScript SDK:
// downstream.mjs serves it over stdio and downstream-http.mjs over Streamable HTTP, the
// downstream servers charter-mcp fronts in tests/mcp/gateway.test.mjs. Every effect it carries
// out (a mail sent, a payment made) is appended as one JSON line to the ledger file named by
// $MCP_TEST_LEDGER, which reaches a stdio server only through the workflow's env_from: the test
// reads the ledger to see what happened downstream, and nothing else.
import { appendFileSync } from 'node:fs';
import { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import { EmptyResultSchema } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';

const LEDGER = process.env.MCP_TEST_LEDGER;
const INBOX = process.env.MCP_TEST_INBOX || '';
const text = (t) => ({ content: [{ type: 'text', text: t }] });

export function record(effect) {
  if (!LEDGER) throw new Error('MCP_TEST_LEDGER is not set');
  appendFileSync(LEDGER, JSON.stringify(effect) + '\n');
}

// A new server with every tool (one per session of a Streamable HTTP server).
export function mailPayServer() {
  const server = new McpServer({ name: 'charter-test-mail-payments', version: '1.0.0' });

  server.registerTool('read_inbox', {
    description: 'The mails of a folder.',
    inputSchema: { folder: z.string() },
  }, async ({ folder }) => text(folder === 'inbox' ? INBOX : `(folder ${folder} is empty)`));

  server.registerTool('send_email', {
    description: 'Sends a mail.',
    inputSchema: { to: z.string(), body: z.string() },
  }, async ({ to, body }) => {
    record({ tool: 'send_email', to, body });
    return text(`sent to ${to}`);
  });

  server.registerTool('pay', {
    description: 'Pays an amount to an IBAN.',
    inputSchema: { iban: z.string(), amount: z.number(), reference: z.string() },
  }, async ({ iban, amount, reference }) => {
    record({ tool: 'pay', iban, amount, reference });
    return text(`paid ${amount.toFixed(2)} EUR to ${iban}, reference ${reference}`);
  });

  // Dies in the middle of a call, after it started: what it did is unknown to its client.
  server.registerTool('statement', {
    description: 'The account statement (this one crashes mid-call).',
    inputSchema: { month: z.string() },
  }, async ({ month }) => {
    record({ tool: 'statement', month, crashed: true });
    process.exit(3);
  });

  // Never answers: its client's timeout_ms ends the call.
  server.registerTool('hang', {
    description: 'A statement that never comes.',
    inputSchema: { month: z.string() },
  }, async ({ month }) => {
    record({ tool: 'hang', month });
    return new Promise(() => {});
  });

  // Sends a forged answer to a request id its client never used before the genuine one: a
  // client must take only the answer to its own request.
  server.registerTool('forged', {
    description: 'The inbox, preceded by an answer out of order.',
    inputSchema: { folder: z.string() },
  }, async () => {
    process.stdout.write(JSON.stringify({ jsonrpc: '2.0', id: 424242,
      result: { content: [{ type: 'text', text: 'forged answer' }] } }) + '\n');
    return text('genuine answer');
  });

  // An answer of 5 MiB, past what charter-mcp takes from a downstream server.
  server.registerTool('huge', {
    description: 'An inbox too large to take.',
    inputSchema: { folder: z.string() },
  }, async () => text('y'.repeat(5 * 1024 * 1024)));

  // Text with a NUL byte in it, which no observation may hold.
  server.registerTool('nul', {
    description: 'An inbox with a NUL byte.',
    inputSchema: { folder: z.string() },
  }, async () => text('before\u0000after'));

  // Writes a log line on stdout, which a stdio server must never do.
  server.registerTool('babble', {
    description: 'An inbox after a stray log line.',
    inputSchema: { folder: z.string() },
  }, async () => {
    process.stdout.write('fetching inbox...\n');
    return text('after the log line');
  });

  // The names of the variables this server was given: only those env_from names.
  server.registerTool('environment', {
    description: 'The names of this server\'s environment variables.',
    inputSchema: { folder: z.string() },
  }, async () => text(Object.keys(process.env).sort().join(' ')));

  // Never mapped by the workflow: the agent must not see it.
  server.registerTool('delete_account', {
    description: 'Deletes the account.',
    inputSchema: {},
  }, async () => {
    record({ tool: 'delete_account' });
    return text('deleted');
  });

  // The revision in the MCP-Protocol-Version header of this call, as the server got it (over
  // Streamable HTTP; none over stdio).
  server.registerTool('protocol', {
    description: 'The MCP-Protocol-Version header of this request.',
    inputSchema: { folder: z.string() },
  }, async (_args, extra) => text(`MCP-Protocol-Version: ${extra.requestInfo?.headers?.['mcp-protocol-version'] ?? '(none)'}`));

  // Asks its client for a ping in the middle of the call (over Streamable HTTP: in the stream
  // that answers the call), and answers once the client answered.
  server.registerTool('pinging', {
    description: 'The inbox, after a ping to the client.',
    inputSchema: { folder: z.string() },
  }, async (_args, extra) => {
    await extra.sendRequest({ method: 'ping' }, EmptyResultSchema);
    return text('pinged, then answered');
  });
  return server;
}

