"""decision.py - a decision made readable: outcome, codes and witness in one line.

A gate's decision is an answer, not an error: a refused delivery is a successful call whose
Decision says DENY, with the codes that applied and the witness path to the offending fact.
verdict() takes a Decision, a message that holds one (DeliverResponse, CheckInputResponse,
...), or an Event (decision events carry outcome, codes and witness themselves).
"""
from typing import NamedTuple, Tuple

from . import charter_pb2


class Verdict(NamedTuple):
    """outcome: "ALLOW", "DENY", "UNKNOWN" (or "OUTCOME_UNSPECIFIED" when none was made);
    codes: the decision codes ("INPUT_OUT_OF_SCOPE", ...); witness: the path, "" for ALLOW."""

    outcome: str
    codes: Tuple[str, ...]
    witness: str

    @property
    def allowed(self):
        """True only for ALLOW: nothing else has an effect."""
        return self.outcome == "ALLOW"

    def __str__(self):
        text = self.outcome
        if self.codes:
            text += " " + ",".join(self.codes)
        if self.witness:
            text += ": " + self.witness
        return text

    def require_allowed(self):
        """Returns self when ALLOW, else raises DecisionRefused naming the verdict."""
        if not self.allowed:
            raise DecisionRefused(self)
        return self


class DecisionRefused(Exception):
    """Raised by Verdict.require_allowed for DENY or UNKNOWN; .verdict holds the decision."""

    def __init__(self, v):
        super().__init__(str(v))
        self.verdict = v


def verdict(message):
    """The Verdict of a Decision, of a response holding one in its field `decision`, or of an
    Event. A response whose decision is not set reads OUTCOME_UNSPECIFIED (no decision, no
    effect). Raises TypeError for a message that holds no decision."""
    fields = message.DESCRIPTOR.fields_by_name
    if "outcome" not in fields or "codes" not in fields or "witness" not in fields:
        if "decision" not in fields:
            raise TypeError(f"{message.DESCRIPTOR.full_name} holds no decision")
        message = message.decision
    number = message.outcome
    try:
        outcome = charter_pb2.Outcome.Name(number)
    except ValueError:
        outcome = str(number)
    return Verdict(outcome, tuple(message.codes), message.witness)
