"""client.py - Client: one method per RPC of charter.v1, made from the proto's descriptors.

Every method of every service block of proto/charter.proto becomes a method of Client named in
snake_case (Runs/CreateRun -> create_run), made when this module is imported from the service
descriptors of the generated charter_pb2: the input and output types come from the method's
descriptor, so a method added to the proto is a method of the client at the next build.

A call is one Connect unary exchange (connectrpc.com/docs/protocol) over http.client:
POST <base>/charter.v1.<Service>/<Method>, Content-Type: application/json, the request in the
proto3 JSON mapping, Authorization: Bearer <token>, Connect-Timeout-Ms, Charter-Tenant. charterd
takes JSON only (server/rpc/http.c answers any other content type 415).
"""
import http.client
import json
import math
import re
import socket
import urllib.parse

from google.protobuf import json_format, message_factory, symbol_database

from . import charter_pb2
from .errors import error_of, error_of_http

# Time past a call's deadline the client waits for charterd's own answer (a deadline_exceeded
# or an EFFECT_UNKNOWN verdict says more than a closed socket), seconds.
DEADLINE_MARGIN = 1.0
# Largest answer read, bytes (charterd's own cap on an answer: HTTP_MAX_REPLY).
MAX_ANSWER = 64 * 1024 * 1024


def _message_class(descriptor):
    """The generated class of a message descriptor (GetMessageClass from protobuf 4.22 on;
    the symbol database before, as in Debian 12's 3.21)."""
    if hasattr(message_factory, "GetMessageClass"):
        return message_factory.GetMessageClass(descriptor)
    return symbol_database.Default().GetSymbol(descriptor.full_name)


def _snake(name):
    return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()


class Method:
    """One RPC: its path, its descriptor and its message classes."""

    def __init__(self, descriptor):
        self.descriptor = descriptor
        self.path = f"/{descriptor.containing_service.full_name}/{descriptor.name}"
        self.input = _message_class(descriptor.input_type)
        self.output = _message_class(descriptor.output_type)


# Keywords of every RPC method that are options of the call, never request fields.
_CALL_OPTIONS = ("timeout", "tenant", "token")


def _methods():
    """Client method name -> Method. A proto change that would make two RPCs one method, or a
    request field unreachable by keyword, fails the import rather than calling the wrong one."""
    out = {}
    for service in charter_pb2.DESCRIPTOR.services_by_name.values():
        for m in service.methods:
            name = _snake(m.name)
            if name in out:
                raise ImportError(f"charter_client: {service.name}/{m.name} and "
                                  f"{out[name].path} would both be Client.{name}")
            for field in m.input_type.fields:
                if field.name in _CALL_OPTIONS:
                    raise ImportError(f"charter_client: {m.input_type.full_name}.{field.name} "
                                      "is named like a call option")
            out[name] = Method(m)
    return out


# Client method name -> Method, for every RPC of charter.v1.
METHODS = _methods()
_BY_PATH = {m.path: m for m in METHODS.values()}


class Client:
    """A client of one charterd's HTTP listener (charterd --http HOST:PORT).

    base_url  "http://127.0.0.1:8080" (a path prefix is kept, for a proxy in front)
    token     the bearer token of every call (operator, viewer or a stored credential), or None
    tenant    the tenant every call names (header Charter-Tenant), or None for the default
    timeout   each call's deadline in seconds (Connect-Timeout-Ms); None: charterd's default

    Each RPC method takes the request as a message of its input type, as a dict in the proto3
    JSON mapping, or as keyword fields; and the keywords timeout, tenant and token for that
    call alone. It returns the output message, or raises a CharterError subclass (NotFound,
    PermissionDenied, ...). Client holds no connection between calls and may be shared by
    threads.
    """

    def __init__(self, base_url="http://127.0.0.1:8080", *, token=None, tenant=None,
                 timeout=None):
        u = urllib.parse.urlsplit(base_url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise ValueError(f"base_url {base_url!r}: expected http://host:port")
        self._https = u.scheme == "https"
        self._host = u.hostname
        self._port = u.port
        self._prefix = u.path.rstrip("/")
        self.token = token
        self.tenant = tenant
        self.timeout = _check_timeout(timeout)

    def call(self, method, request=None, *, timeout=None, tenant=None, token=None, **fields):
        """One call of method (a Client method name, "create_run", or a path,
        "/charter.v1.Runs/CreateRun"); see the class for the rest."""
        m = METHODS.get(method) or _BY_PATH.get(method)
        if m is None:
            raise ValueError(f"no method {method!r} in charter.v1")
        body = json.dumps(_request_json(m, request, fields), separators=(",", ":"))
        timeout = self.timeout if timeout is None else _check_timeout(timeout)
        headers = {"Content-Type": "application/json", "Accept": "application/json",
                   "Connect-Protocol-Version": "1"}
        token = self.token if token is None else token
        if token:
            headers["Authorization"] = f"Bearer {token}"
        tenant = self.tenant if tenant is None else tenant
        if tenant:
            headers["Charter-Tenant"] = tenant
        if timeout is not None:
            headers["Connect-Timeout-Ms"] = str(max(1, math.ceil(timeout * 1000)))
        status, ctype, answer = self._exchange(m.path, body.encode("utf-8"), headers, timeout)
        if status != 200:
            raise _error(status, ctype, answer)
        try:
            return json_format.Parse(answer, m.output(), ignore_unknown_fields=True)
        except (json_format.ParseError, UnicodeDecodeError) as e:
            raise error_of("internal", f"{m.path}: the answer is not a "
                           f"{m.output.DESCRIPTOR.full_name}: {e}", status) from None

    def _exchange(self, path, body, headers, timeout):
        """POSTs body; returns (HTTP status, content type, answer bytes)."""
        wait = None if timeout is None else timeout + DEADLINE_MARGIN
        cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
        conn = cls(self._host, self._port, timeout=wait)
        try:
            conn.request("POST", self._prefix + path, body=body, headers=headers)
            res = conn.getresponse()
            answer = res.read(MAX_ANSWER + 1)
            if len(answer) > MAX_ANSWER:
                raise error_of("resource_exhausted", f"{path}: answer above {MAX_ANSWER} bytes")
            return res.status, res.getheader("Content-Type", ""), answer
        except socket.timeout:
            raise error_of("deadline_exceeded", f"{path}: no answer within {wait:g} s") from None
        except (OSError, http.client.HTTPException) as e:
            raise error_of("unavailable", f"{path}: {self._host}:{self._port}: {e}") from None
        finally:
            conn.close()


def _check_timeout(timeout):
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or \
            not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout {timeout!r}: expected a positive number of seconds")
    return float(timeout)


def _request_json(m, request, fields):
    """The request as a JSON value in the proto3 mapping."""
    if request is not None and fields:
        raise TypeError(f"{m.path}: give the request or its fields, not both")
    if request is None:
        request = m.input(**fields)
    elif isinstance(request, dict):
        request = json_format.ParseDict(request, m.input())
    elif getattr(request, "DESCRIPTOR", None) is not m.input.DESCRIPTOR:
        raise TypeError(f"{m.path} takes a {m.input.DESCRIPTOR.full_name}, "
                        f"not {type(request).__name__}")
    return json_format.MessageToDict(request)


def _error(status, ctype, answer):
    """The CharterError of a non-200 answer: its Connect error body, else its HTTP status."""
    if ctype.split(";")[0].strip().lower() == "application/json":
        try:
            e = json.loads(answer)
        except ValueError:
            e = None
        if isinstance(e, dict) and isinstance(e.get("code"), str):
            message = e.get("message")
            return error_of(e["code"], message if isinstance(message, str) else "", status)
    text = answer[:200].decode("utf-8", "replace")
    return error_of_http(status, f"HTTP {status}: {text}")


def _bind(name, m):
    def rpc(self, request=None, *, timeout=None, tenant=None, token=None, **fields):
        return self.call(name, request, timeout=timeout, tenant=tenant, token=token, **fields)

    rpc.__name__ = rpc.__qualname__ = name
    rpc.__doc__ = (f"{m.path[1:]}: {m.input.DESCRIPTOR.full_name} -> "
                   f"{m.output.DESCRIPTOR.full_name}")
    return rpc


for _name, _m in METHODS.items():
    setattr(Client, _name, _bind(_name, _m))
del _name, _m
