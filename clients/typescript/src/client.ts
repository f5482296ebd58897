// client.ts - one Connect client per service of charter.v1, over one transport to charterd --http.
//
// charterd's HTTP listener serves Connect unary calls with the proto3 JSON mapping only
// (application/proto is answered 415) over HTTP/1.1, so the transport is connect-node's Connect
// transport with the JSON format. The bearer token and the tenant travel as headers set by one
// interceptor; a header the caller already set on a call (CallOptions.headers) is kept, so one
// call may use another token or tenant.
import { createClient, type Client, type Interceptor, type Transport } from "@connectrpc/connect";
import { createConnectTransport } from "@connectrpc/connect-node";
import {
  Approvals,
  Credentials,
  Evidence,
  Gate,
  Grants,
  Health,
  Reflection,
  Resources,
  Retrieval,
  Runs,
  Tenants,
  Workflows,
} from "./gen/charter_pb.js";

/** Every service of charter.v1, by the name it has on a CharterClient (its own name in
 *  lowerCamelCase; the test checks this against the proto). */
export interface Services {
  readonly runs: typeof Runs;
  readonly gate: typeof Gate;
  readonly grants: typeof Grants;
  readonly resources: typeof Resources;
  readonly health: typeof Health;
  readonly evidence: typeof Evidence;
  readonly workflows: typeof Workflows;
  readonly retrieval: typeof Retrieval;
  readonly reflection: typeof Reflection;
  readonly tenants: typeof Tenants;
  readonly credentials: typeof Credentials;
  readonly approvals: typeof Approvals;
}

export const services: Services = Object.freeze({
  runs: Runs,
  gate: Gate,
  grants: Grants,
  resources: Resources,
  health: Health,
  evidence: Evidence,
  workflows: Workflows,
  retrieval: Retrieval,
  reflection: Reflection,
  tenants: Tenants,
  credentials: Credentials,
  approvals: Approvals,
});

/** What createCharterClient needs to reach one charterd. */
export interface CharterClientOptions {
  /** charterd's HTTP listener, e.g. "http://127.0.0.1:8080" (charterd --http). */
  baseUrl: string;
  /** An operator or viewer token, or a stored credential's secret: sent as
   *  "Authorization: Bearer <token>". Without one only Health/Check answers. */
  token?: string;
  /** The tenant (graph) every call names, sent as the "Charter-Tenant" header; without it
   *  charterd serves its default graph, or the one the credential is bound to. */
  tenant?: string;
  /** Deadline of each call in milliseconds, sent as Connect-Timeout-Ms: charterd bounds the
   *  whole call by it, and the client gives up after it (Code.DeadlineExceeded). A call's own
   *  CallOptions.timeoutMs overrides it. Without it a call has no deadline of its own. */
  timeoutMs?: number;
  /** Interceptors run after the one that sets the token and tenant headers. */
  interceptors?: Interceptor[];
}

/** One typed Connect client per service (runs.createRun, gate.deliver, ...), and their
 *  transport. Failed calls reject with ConnectError, whose code is a Code; decisions are
 *  answers, not errors: read them with verdict(). */
export type CharterClient = { [K in keyof Services]: Client<Services[K]> } & {
  readonly transport: Transport;
};

/** The interceptor that names the caller and the tenant on each request, unless the call
 *  set that header itself. */
export function charterHeaders(token?: string, tenant?: string): Interceptor {
  return (next) => async (req) => {
    if (token !== undefined && !req.header.has("Authorization")) {
      req.header.set("Authorization", `Bearer ${token}`);
    }
    if (tenant !== undefined && !req.header.has("Charter-Tenant")) {
      req.header.set("Charter-Tenant", tenant);
    }
    return next(req);
  };
}

// A header value must be one line of visible text: fail here, not as a confusing transport error.
function checkHeaderValue(name: string, value: string | undefined): void {
  if (value === undefined) return;
  if (!/^[\x21-\x7e](?:[\x20-\x7e]*[\x21-\x7e])?$/.test(value)) {
    throw new TypeError(`${name} must be printable ASCII, not empty, not starting or ending in a space`);
  }
}

/** Clients of every charter.v1 service over one Connect transport (JSON, HTTP/1.1) to
 *  options.baseUrl. Throws TypeError for a baseUrl that is not an http(s) URL, a token or
 *  tenant that cannot be a header value, or a timeoutMs that is not a positive integer. */
export function createCharterClient(options: CharterClientOptions): CharterClient {
  const { baseUrl, token, tenant, timeoutMs, interceptors = [] } = options;
  let url: URL;
  try {
    url = new URL(baseUrl);
  } catch {
    throw new TypeError(`baseUrl ${JSON.stringify(baseUrl)} is not a URL`);
  }
  if (url.protocol !== "http:" && url.protocol !== "https:") {
    throw new TypeError(`baseUrl ${JSON.stringify(baseUrl)} is not http: or https:`);
  }
  checkHeaderValue("token", token);
  checkHeaderValue("tenant", tenant);
  if (timeoutMs !== undefined && !(Number.isInteger(timeoutMs) && timeoutMs > 0)) {
    throw new TypeError(`timeoutMs must be a positive whole number of milliseconds`);
  }
  const transport = createConnectTransport({
    baseUrl,
    httpVersion: "1.1",
    useBinaryFormat: false,
    defaultTimeoutMs: timeoutMs,
    interceptors: [charterHeaders(token, tenant), ...interceptors],
  });
  const clients = Object.fromEntries(
    Object.entries(services).map(([name, service]) => [name, createClient(service, transport)]),
  ) as { [K in keyof Services]: Client<Services[K]> };
  return { ...clients, transport };
}
