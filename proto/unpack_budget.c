/*
 * unpack_budget.c - a protobuf-c allocator that stops at a byte budget (see unpack_budget.h).
 *
 * A block is charged and credited at its usable size (glibc's malloc_usable_size), the same
 * number both ways, so no header is needed in front of it and the memory stays malloc's own.
 */
#include "unpack_budget.h"

#include <malloc.h>
#include <stdint.h>
#include <stdlib.h>

void unpack_budget_init(unpack_budget *b, size_t len, size_t factor, size_t floor)
{
    b->used = 0;
    b->exhausted = false;
    b->limit = factor != 0 && len > SIZE_MAX / factor ? SIZE_MAX : len * factor;
    if (b->limit < floor)
        b->limit = floor;
}

static void *unpack_budget_alloc(void *data, size_t size)
{
    unpack_budget *b = data;
    if (b->used >= b->limit || size > b->limit - b->used) {
        b->exhausted = true;
        return NULL;
    }
    void *p = malloc(size > 0 ? size : 1);
    if (p == NULL)
        return NULL;
    b->used += malloc_usable_size(p);
    return p;
}

static void unpack_budget_free(void *data, void *ptr)
{
    unpack_budget *b = data;
    if (ptr == NULL)
        return;
    size_t n = malloc_usable_size(ptr);
    b->used = n < b->used ? b->used - n : 0;
    free(ptr);
}

ProtobufCAllocator unpack_budget_allocator(unpack_budget *b)
{
    ProtobufCAllocator a = {unpack_budget_alloc, unpack_budget_free, b};
    return a;
}
