// decision.ts - a gate's decision made readable: outcome, codes and witness in one line.
//
// A decision is an answer, not an error: a refused delivery is a successful call whose Decision
// says DENY, with the codes that applied and the witness path to the offending fact. verdict()
// reads a Decision, a response that holds one in its field `decision` (DeliverResponse,
// CheckInputResponse, ReadSourceResponse, ...), or a decision Event (input_checked,
// delivery_decided), which carries outcome, codes and witness itself.
import { Outcome, type Decision } from "./gen/charter_pb.js";

/** The name of an Outcome value; a number the proto does not name reads as its digits. */
export type OutcomeName = keyof typeof Outcome | `${number}`;

/** What carries a verdict itself: a Decision or an Event. */
export interface DecisionFields {
  outcome: Outcome;
  codes: string[];
  witness: string;
}

/** A response whose field `decision` holds the verdict (unset: no decision was made). */
export interface HoldsDecision {
  decision?: Decision;
}

/** A decision, read. Only ALLOW has an effect. */
export class Verdict {
  /** "ALLOW", "DENY", "UNKNOWN", or "OUTCOME_UNSPECIFIED" when no decision was made. */
  readonly outcome: OutcomeName;
  /** The decision codes, e.g. ["INPUT_OUT_OF_SCOPE"]; empty for ALLOW. */
  readonly codes: readonly string[];
  /** The path from the payload to the offending fact; "" for ALLOW. */
  readonly witness: string;

  constructor(outcome: OutcomeName, codes: readonly string[], witness: string) {
    this.outcome = outcome;
    this.codes = Object.freeze([...codes]);
    this.witness = witness;
    Object.freeze(this);
  }

  /** True only for ALLOW. */
  get allowed(): boolean {
    return this.outcome === "ALLOW";
  }

  /** "ALLOW", or "DENY INPUT_OUT_OF_SCOPE: budget (confidential) → ... {vendor_a, ...}". */
  toString(): string {
    let text: string = this.outcome;
    if (this.codes.length > 0) text += ` ${this.codes.join(",")}`;
    if (this.witness !== "") text += `: ${this.witness}`;
    return text;
  }
}

/** Thrown by requireAllowed for anything but ALLOW; .verdict holds the decision. */
export class DecisionRefused extends Error {
  readonly verdict: Verdict;

  constructor(verdict: Verdict) {
    super(verdict.toString());
    this.name = "DecisionRefused";
    this.verdict = verdict;
  }
}

function outcomeName(n: Outcome): OutcomeName {
  const name = Outcome[n] as keyof typeof Outcome | undefined;
  return name ?? `${n as number}`;
}

/** The Verdict of a Decision or Event, or of a response holding a decision. A response
 *  whose decision is unset reads OUTCOME_UNSPECIFIED: no decision, no effect. Throws
 *  TypeError for a value that holds neither. */
export function verdict(message: DecisionFields | HoldsDecision): Verdict {
  let d: DecisionFields | undefined;
  if ("outcome" in message && "codes" in message && "witness" in message) {
    d = message;
  } else if ("decision" in message) {
    d = message.decision;
    if (d === undefined) return new Verdict("OUTCOME_UNSPECIFIED", [], "");
  } else {
    throw new TypeError("the value holds no decision (no outcome, codes and witness, no decision)");
  }
  return new Verdict(outcomeName(d.outcome), d.codes, d.witness);
}

/** The Verdict of message when it is ALLOW; throws DecisionRefused otherwise. */
export function requireAllowed(message: DecisionFields | HoldsDecision): Verdict {
  const v = verdict(message);
  if (!v.allowed) throw new DecisionRefused(v);
  return v;
}
