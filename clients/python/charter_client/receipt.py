"""receipt.py - checks a receipt's HMAC-SHA256 offline, as charter_receipt_verify does in C.

A receipt's mac is HMAC-SHA256, under the integrity key (the key file's bytes, a trailing
newline included), over a canonical text of "name=value" lines (README, "The canonical text";
proto/receipt.c builds the same text). A receipt that could make that text ambiguous is
malformed and never verifies. Ed25519 signatures (charterd --signing-key) need a library the
standard library lacks: check those with `charter verify-receipt --public-key`.
"""
import hashlib
import hmac
import re

from google.protobuf import json_format

from . import charter_pb2

FORMAT_1 = "charter-receipt-1"
FORMAT_2 = "charter-receipt-2"
_MAC = re.compile(r"[0-9a-f]{64}")


class ReceiptInvalid(Exception):
    """The receipt is malformed, altered, or sealed under another key; .reason says which."""

    def __init__(self, reason):
        super().__init__(reason)
        self.reason = reason


def _receipt(receipt):
    """A Receipt message from a message or from the JSON document `charter --json receipt`
    prints (lowerCamelCase, or the snake_case of older releases); a field the message lacks is refused, as the mac
    would not cover it."""
    if isinstance(receipt, charter_pb2.Receipt):
        return receipt
    if isinstance(receipt, dict):
        try:
            return json_format.ParseDict(receipt, charter_pb2.Receipt())
        except json_format.ParseError as e:
            raise ReceiptInvalid(f"not a receipt: {e}") from None
    raise TypeError("a receipt is a charter_pb2.Receipt or a dict")


def _line(name, value):
    if "\n" in value or "\r" in value or "\0" in value:
        raise ReceiptInvalid(f"receipt field {name} holds a line break")
    return f"{name}={value}\n"


def _list(name, items):
    for i, v in enumerate(items):
        if v == "" or "," in v or "\n" in v or "\r" in v or "\0" in v:
            raise ReceiptInvalid(f"receipt field {name}[{i}] is empty or holds a comma or line break")
    return f"{name}={','.join(items)}\n"


def receipt_text(receipt):
    """The canonical text the mac covers, as UTF-8 bytes; raises ReceiptInvalid when the
    receipt is malformed (a kind other than delivery or run, a missing run_id, invocation_id
    or status, a field its kind does not list, a line break, an empty or comma-holding list
    item)."""
    r = _receipt(receipt)
    delivery = r.kind == "delivery"
    if not delivery and r.kind != "run":
        raise ReceiptInvalid('receipt kind must be "delivery" or "run"')
    if not r.run_id:
        raise ReceiptInvalid("receipt has no run_id")
    if delivery:
        if not r.invocation_id:
            raise ReceiptInvalid("delivery receipt has no invocation_id")
        foreign = {"status": r.status, "last_seq": r.last_seq,
                   "last_event_hash": r.last_event_hash, "deliveries": list(r.deliveries),
                   "budget": r.budget, "counters": r.counters}
    else:
        if not r.status:
            raise ReceiptInvalid("run receipt has no status")
        foreign = {"invocation_id": r.invocation_id, "payload_hash": r.payload_hash,
                   "recipient": r.recipient, "tool": r.tool, "grant_chain": list(r.grant_chain)}
    for name, value in foreign.items():
        if value:
            raise ReceiptInvalid(f"receipt field {name} is not part of a {r.kind} receipt")

    v2 = not delivery and (r.budget != "" or r.counters != "")
    text = _line("format", FORMAT_2 if v2 else FORMAT_1)
    text += _line("kind", r.kind) + _line("run_id", r.run_id)
    if delivery:
        text += (_line("invocation_id", r.invocation_id) + _line("payload_hash", r.payload_hash) +
                 _line("recipient", r.recipient) + _line("tool", r.tool) +
                 _list("grant_chain", r.grant_chain))
    else:
        text += (_line("status", r.status) + _line("last_seq", str(r.last_seq)) +
                 _line("last_event_hash", r.last_event_hash) + _list("deliveries", r.deliveries))
        if v2:
            text += _line("budget", r.budget) + _line("counters", r.counters)
    text += _line("time", r.time) + _line("evaluator", r.evaluator)
    return text.encode("utf-8")


def verify_receipt(receipt, key):
    """Returns None when the receipt's mac is the HMAC-SHA256 of its canonical text under key
    (bytes: the integrity key file's contents); raises ReceiptInvalid otherwise."""
    if not isinstance(key, (bytes, bytearray)) or len(key) == 0:
        raise TypeError("the integrity key is the key file's bytes")
    r = _receipt(receipt)
    if not _MAC.fullmatch(r.mac):
        raise ReceiptInvalid("the receipt's mac is not 64 lowercase hex digits")
    want = hmac.new(bytes(key), receipt_text(r), hashlib.sha256).hexdigest()
    if not hmac.compare_digest(want, r.mac):
        raise ReceiptInvalid("the mac does not match: the receipt was altered or signed under "
                             "another key")
