/*
 * ask.c - the model a run's mode names answers the step's request (see ask.h).
 */
#include "runs/ask.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "runs/provider.h"

#if defined(__GNUC__)
__attribute__((format(printf, 3, 4)))
#endif
static int
ask_fail(char *err, size_t errlen, const char *fmt, ...)
{
    if (err != NULL && errlen > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int ask_model(const char *mode, const model_request *req, model_reply *out, char *err,
              size_t errlen)
{
    if (err != NULL && errlen > 0) {
        err[0] = '\0';
    }
    if (out == NULL) {
        return ask_fail(err, errlen, "no place for the model reply");
    }
    memset(out, 0, sizeof *out);
    if (req == NULL || req->step == NULL) {
        return ask_fail(err, errlen, "model request has no step");
    }
    if (mode == NULL) {
        return ask_fail(err, errlen, "unknown model mode (none given)");
    }
    if (strcmp(mode, "scripted") == 0) {
        return model_scripted(req, out, err, errlen);
    }
    if (strcmp(mode, "live") == 0) {
        if (!provider_configured()) {
            return ask_fail(err, errlen, "%s", PROVIDER_NOT_CONFIGURED);
        }
        return provider_ask(req, out, err, errlen);
    }
    return ask_fail(err, errlen, "unknown model mode \"%.32s\" (known: scripted, live)", mode);
}
