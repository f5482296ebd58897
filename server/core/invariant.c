/*
 * invariant.c - a failed invariant, reported and ended (see invariant.h).
 */
#include "core/invariant.h"

#include <stdlib.h>

#include "core/log.h"

_Noreturn void invariant_fail(const char *expr, const char *file, int line)
{
    log_error("invariant failed: %s at %s:%d; stopping (no effect is half-made: every write is "
              "one atomic database call)",
              expr, file, line);
    abort();
}
