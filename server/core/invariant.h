/*
 * invariant.h - assertions that stay on in every build.
 *
 * assert() checks nothing under NDEBUG, and the builds charter ships define it. An invariant
 * the code relies on (a commit licensed only by ALLOW, an event written at the sequence number
 * it was sealed for) is checked with INVARIANT instead, as Redis keeps serverAssert in release
 * builds: when one fails, the process logs the expression and where, and aborts. Going on would
 * mean acting on a state the code was written never to reach; an abort loses nothing the
 * database holds (every effect is one atomic function call) and leaves a core to read.
 */
#ifndef CHARTER_INVARIANT_H
#define CHARTER_INVARIANT_H

/* Logs "invariant failed: <expr> at <file>:<line>" on stderr and aborts. */
_Noreturn void invariant_fail(const char *expr, const char *file, int line);

#define INVARIANT(e) ((e) ? (void)0 : invariant_fail(#e, __FILE__, __LINE__))

#endif
