// receipt.ts - checks a receipt's HMAC-SHA256 offline, as charter_receipt_verify does in C.
//
// A receipt's mac is HMAC-SHA256, under the integrity key (the key file's bytes, a trailing
// newline included), over a canonical text of "name=value" lines (README, "Receipts", "The
// canonical text"; proto/receipt.c builds the same text). A receipt that could make that text
// ambiguous is malformed and never verifies. Ed25519 signatures (charterd --signing-key) are
// not checked here: use `charter verify-receipt --public-key`.
import { createHmac, timingSafeEqual } from "node:crypto";
import { fromJson, isMessage, type JsonValue } from "@bufbuild/protobuf";
import { ReceiptSchema, type Receipt } from "./gen/charter_pb.js";

const FORMAT_1 = "charter-receipt-1";
const FORMAT_2 = "charter-receipt-2";

/** The receipt is malformed, altered, or sealed under another key; .reason says which. */
export class ReceiptInvalid extends Error {
  readonly reason: string;

  constructor(reason: string) {
    super(reason);
    this.name = "ReceiptInvalid";
    this.reason = reason;
  }
}

// A Receipt from a message or from the JSON document `charter --json receipt` prints
// (lowerCamelCase, or the snake_case of older releases); a field the message lacks is refused, as the mac would not
// cover it.
function asReceipt(receipt: Receipt | JsonValue): Receipt {
  if (isMessage(receipt, ReceiptSchema)) return receipt;
  if (receipt === null || typeof receipt !== "object" || Array.isArray(receipt)) {
    throw new TypeError("a receipt is a Receipt message or its JSON document");
  }
  try {
    return fromJson(ReceiptSchema, receipt);
  } catch (e) {
    throw new ReceiptInvalid(`not a receipt: ${(e as Error).message}`);
  }
}

const lineBreak = /[\n\r\0]/;

function line(name: string, value: string): string {
  if (lineBreak.test(value)) throw new ReceiptInvalid(`receipt field ${name} holds a line break`);
  return `${name}=${value}\n`;
}

function list(name: string, items: readonly string[]): string {
  items.forEach((v, i) => {
    if (v === "" || v.includes(",") || lineBreak.test(v)) {
      throw new ReceiptInvalid(
        `receipt field ${name}[${i}] is empty or holds a comma or line break`,
      );
    }
  });
  return `${name}=${items.join(",")}\n`;
}

function mustBeUnset(fields: Record<string, boolean>, kind: string): void {
  for (const [name, unset] of Object.entries(fields)) {
    if (!unset) throw new ReceiptInvalid(`receipt field ${name} is not part of a ${kind} receipt`);
  }
}

/** The canonical text the mac covers. Throws ReceiptInvalid when the receipt is malformed: a
 *  kind other than delivery or run, a missing run_id, invocation_id or status, a field its
 *  kind does not list, a line break, an empty or comma-holding list item. */
export function receiptText(receipt: Receipt | JsonValue): string {
  const r = asReceipt(receipt);
  const delivery = r.kind === "delivery";
  if (!delivery && r.kind !== "run") {
    throw new ReceiptInvalid('receipt kind must be "delivery" or "run"');
  }
  if (r.runId === "") throw new ReceiptInvalid("receipt has no run_id");
  if (delivery) {
    if (r.invocationId === "") throw new ReceiptInvalid("delivery receipt has no invocation_id");
    mustBeUnset(
      {
        status: r.status === "",
        last_seq: r.lastSeq === 0n,
        last_event_hash: r.lastEventHash === "",
        deliveries: r.deliveries.length === 0,
        budget: r.budget === "",
        counters: r.counters === "",
      },
      r.kind,
    );
  } else {
    if (r.status === "") throw new ReceiptInvalid("run receipt has no status");
    mustBeUnset(
      {
        invocation_id: r.invocationId === "",
        payload_hash: r.payloadHash === "",
        recipient: r.recipient === "",
        tool: r.tool === "",
        grant_chain: r.grantChain.length === 0,
      },
      r.kind,
    );
  }

  // Budget and counters make a run receipt format 2; without them it is format 1's text.
  const v2 = !delivery && (r.budget !== "" || r.counters !== "");
  let text = line("format", v2 ? FORMAT_2 : FORMAT_1) + line("kind", r.kind) + line("run_id", r.runId);
  if (delivery) {
    text +=
      line("invocation_id", r.invocationId) +
      line("payload_hash", r.payloadHash) +
      line("recipient", r.recipient) +
      line("tool", r.tool) +
      list("grant_chain", r.grantChain);
  } else {
    text +=
      line("status", r.status) +
      line("last_seq", r.lastSeq.toString()) +
      line("last_event_hash", r.lastEventHash) +
      list("deliveries", r.deliveries);
    if (v2) text += line("budget", r.budget) + line("counters", r.counters);
  }
  return text + line("time", r.time) + line("evaluator", r.evaluator);
}

/** Returns when the receipt's mac is the HMAC-SHA256 of its canonical text under key (the
 *  integrity key file's bytes, as read: a trailing newline is part of the key); throws
 *  ReceiptInvalid otherwise, and TypeError for an empty key. */
export function verifyReceipt(receipt: Receipt | JsonValue, key: Uint8Array): void {
  if (!(key instanceof Uint8Array) || key.length === 0) {
    throw new TypeError("the integrity key is the key file's bytes");
  }
  const r = asReceipt(receipt);
  if (!/^[0-9a-f]{64}$/.test(r.mac)) {
    throw new ReceiptInvalid("the receipt's mac is not 64 lowercase hex digits");
  }
  const want = createHmac("sha256", key).update(receiptText(r), "utf8").digest();
  if (!timingSafeEqual(want, Buffer.from(r.mac, "hex"))) {
    throw new ReceiptInvalid(
      "the mac does not match: the receipt was altered or signed under another key",
    );
  }
}
