"""errors.py - RPC errors as typed exceptions: one class per Connect code.

charterd answers a failed call with a Connect error body {"code": "not_found", "message": ...}
and the HTTP status of its code (server/rpc/http.c). Each code is also the gRPC status number
the rest of the API uses (RpcResponse.code, proto/charter_codes.h), so an error carries both.
A decision (ALLOW, DENY, UNKNOWN) is never an error: see decision.py.
"""

# Connect code name, gRPC status number, HTTP status: the table of server/rpc/http.c.
CODES = (
    ("canceled", 1, 499),
    ("unknown", 2, 500),
    ("invalid_argument", 3, 400),
    ("deadline_exceeded", 4, 504),
    ("not_found", 5, 404),
    ("already_exists", 6, 409),
    ("permission_denied", 7, 403),
    ("resource_exhausted", 8, 429),
    ("failed_precondition", 9, 400),
    ("aborted", 10, 409),
    ("out_of_range", 11, 400),
    ("unimplemented", 12, 501),
    ("internal", 13, 500),
    ("unavailable", 14, 503),
    ("data_loss", 15, 500),
    ("unauthenticated", 16, 401),
)


class CharterError(Exception):
    """A call that failed: charterd's Connect error, or no answer from it.

    code         Connect code name ("not_found", "permission_denied", ...)
    grpc_status  the same code as charter's status number (5, 7, ...; proto/charter_codes.h)
    http_status  the HTTP status of the answer; 0 when none came (no connection, timeout)
    message      charterd's message (or what went wrong on the way)
    """

    code = "unknown"
    grpc_status = 2

    def __init__(self, message, http_status=0):
        super().__init__(message)
        self.message = message
        self.http_status = http_status

    def __str__(self):
        return f"{self.code}: {self.message}"

    def __repr__(self):
        return (f"{type(self).__name__}(code={self.code!r}, grpc_status={self.grpc_status}, "
                f"http_status={self.http_status}, message={self.message!r})")


def _class_name(code):
    return "".join(part.capitalize() for part in code.split("_"))


# NotFound, PermissionDenied, Unauthenticated, ...: subclasses of CharterError, by code.
BY_CODE = {}
BY_STATUS = {}
for _code, _status, _http in CODES:
    _cls = type(_class_name(_code), (CharterError,),
                {"code": _code, "grpc_status": _status, "__doc__": f"Connect code {_code} "
                 f"(gRPC status {_status}, HTTP {_http})."})
    BY_CODE[_code] = _cls
    BY_STATUS[_status] = _cls
    globals()[_cls.__name__] = _cls
del _code, _status, _http, _cls

__all__ = ["CharterError", "CODES", "BY_CODE", "BY_STATUS"] + [c.__name__ for c in BY_CODE.values()]

# The code of an HTTP status whose body is no Connect error (a proxy's page, for example),
# as the Connect protocol maps it ("HTTP to Error Code").
_FROM_HTTP = {400: "internal", 401: "unauthenticated", 403: "permission_denied",
              404: "unimplemented", 429: "unavailable", 502: "unavailable",
              503: "unavailable", 504: "unavailable"}


def error_of(code, message, http_status=0):
    """The CharterError subclass for a Connect code name (an unknown name gives Unknown)."""
    return BY_CODE.get(code, BY_CODE["unknown"])(message, http_status)


def error_of_http(http_status, message):
    """The error of an answer that carries no Connect error body."""
    return error_of(_FROM_HTTP.get(http_status, "unknown"), message, http_status)
