"""charter_client - a client of charterd (charter.v1) speaking Connect over HTTP.

    from charter_client import Client, verdict
    c = Client("http://127.0.0.1:8080", token=operator_token, timeout=5)
    run = c.create_run(mode="scripted").run

Client has one method per RPC of proto/charter.proto; failures raise CharterError subclasses
(NotFound, PermissionDenied, ...); verdict() reads a decision; verify_receipt() checks a
receipt's HMAC offline. The generated messages are in charter_client.charter_pb2.
"""
from . import charter_pb2
from .client import METHODS, Client
from .decision import DecisionRefused, Verdict, verdict
from .errors import *  # noqa: F401,F403  CharterError, NotFound, PermissionDenied, ...
from .errors import __all__ as _errors
from .receipt import ReceiptInvalid, receipt_text, verify_receipt

__version__ = "0.1.0"
__all__ = ["charter_pb2", "Client", "METHODS", "Verdict", "verdict", "DecisionRefused",
           "ReceiptInvalid", "receipt_text", "verify_receipt"] + _errors
