// consumer.ts - code a user of the package writes, type-checked (tsc --noEmit, strict) against
// the installed package's .d.ts by client.test.mjs; never run. The @ts-expect-error lines must
// each be errors: types that collapsed to `any` would leave them unused, and tsc would fail.
import {
  Code,
  ConnectError,
  Outcome,
  createCharterClient,
  requireAllowed,
  verdict,
  verifyReceipt,
  type CharterClient,
  type DeliverResponse,
  type Receipt,
  type RunView,
  type Verdict,
} from "charter-client";

const c: CharterClient = createCharterClient({
  baseUrl: "http://127.0.0.1:8080",
  token: "operator-token",
  tenant: "charter",
  timeoutMs: 5000,
});

export async function typedCalls(key: Uint8Array): Promise<string> {
  const view: RunView = await c.runs.createRun({ mode: "scripted" });
  const seq: bigint | undefined = view.run?.seq;
  const sent: DeliverResponse = await c.gate.deliver(
    { contextId: "c1", payloadId: "a1", recipient: "cfo", tool: "deliver_internal", invocationId: "i1" },
    { timeoutMs: 1000 },
  );
  const v: Verdict = verdict(sent);
  const outcome: Outcome = sent.decision?.outcome ?? Outcome.OUTCOME_UNSPECIFIED;
  const receipt: Receipt = await c.evidence.getReceipt({ runId: "r1", invocationId: "i1" });
  verifyReceipt(receipt, key);
  requireAllowed(sent);
  try {
    await c.runs.getRun({ runId: "r0" });
  } catch (e) {
    if (e instanceof ConnectError && e.code === Code.NotFound) return e.rawMessage;
  }
  // @ts-expect-error: mode is a string
  await c.runs.createRun({ mode: 1 });
  // @ts-expect-error: Runs has no deliver
  await c.runs.deliver({});
  // @ts-expect-error: charter.v1 has no such service
  void c.nope;
  // @ts-expect-error: timeoutMs is a number of milliseconds
  createCharterClient({ baseUrl: "http://127.0.0.1:8080", timeoutMs: "5000" });
  // @ts-expect-error: a RunView holds no decision
  verdict(view);
  // @ts-expect-error: the outcome is a name, not a number
  const n: number = v.outcome;
  return `${seq} ${v.allowed} ${outcome} ${n}`;
}
