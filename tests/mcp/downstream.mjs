// The mail and payments server of this suite (mailpay.mjs) over stdio, run offline: a
// downstream server charter-mcp starts and fronts in tests/mcp/gateway.test.mjs.
import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import { mailPayServer } from './mailpay.mjs';

await mailPayServer().connect(new StdioServerTransport());
