/*
 * unpack_budget.h - a protobuf-c allocator that stops at a byte budget.
 *
 * protobuf-c's unpack trusts the lengths and counts inside a message, so a small message can
 * ask it for a great deal of memory. Every decoder of untrusted bytes (charterd's dispatch and
 * its HTTP/JSON listener, libcharter reading charterd's answers) unpacks with this allocator,
 * whose budget is a multiple of the encoded size with a floor for small messages. Its memory is
 * plain malloc memory, so a message it built may be freed with its generated __free_unpacked
 * and a NULL allocator; freed through the allocator, the bytes go back to the budget.
 */
#ifndef CHARTER_UNPACK_BUDGET_H
#define CHARTER_UNPACK_BUDGET_H

#include <protobuf-c/protobuf-c.h>
#include <stdbool.h>
#include <stddef.h>

typedef struct {
    size_t used;    /* bytes allocated and not freed through the allocator */
    size_t limit;   /* bytes the budget allows */
    bool exhausted; /* an allocation was refused for the budget (not for malloc failing) */
} unpack_budget;

/* A budget of len * factor bytes, at least floor, saturating at SIZE_MAX (bytes). */
void unpack_budget_init(unpack_budget *b, size_t len, size_t factor, size_t floor);

/* The allocator drawing on b; b must outlive every use of it. */
ProtobufCAllocator unpack_budget_allocator(unpack_budget *b);

#endif
