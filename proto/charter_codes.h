/*
 * charter_codes.h - the status numbers of the API contract: gRPC's, the same as
 * RpcResponse.code. libcharter's functions and the receipt code shared by charterd and
 * libcharter (receipt.h) return 0 or one of them negated (-CHARTER_UNAVAILABLE, ...).
 */
#ifndef CHARTER_CODES_H
#define CHARTER_CODES_H

enum {
    CHARTER_OK = 0,
    CHARTER_CANCELLED = 1,
    CHARTER_UNKNOWN = 2,
    CHARTER_INVALID_ARGUMENT = 3,
    CHARTER_DEADLINE_EXCEEDED = 4,
    CHARTER_NOT_FOUND = 5,
    CHARTER_ALREADY_EXISTS = 6,
    CHARTER_PERMISSION_DENIED = 7,
    CHARTER_RESOURCE_EXHAUSTED = 8,
    CHARTER_FAILED_PRECONDITION = 9,
    CHARTER_ABORTED = 10,
    CHARTER_OUT_OF_RANGE = 11,
    CHARTER_UNIMPLEMENTED = 12,
    CHARTER_INTERNAL = 13,
    CHARTER_UNAVAILABLE = 14,
    CHARTER_DATA_LOSS = 15,
    CHARTER_UNAUTHENTICATED = 16,
};

#endif
