/*
 * fuzz_receipt.c - libFuzzer target for the receipt verifier: the bytes of a charter.v1.Receipt
 * as GetReceipt delivers them, unpacked, turned into the canonical text its MAC covers, MAC'd
 * and verified offline under a fixed key (the seeds in tests/fuzz/corpus/fuzz_receipt were
 * signed under it, so mutations start from receipts that verify).
 *
 * What must hold for any input: a receipt whose text cannot be built never verifies; the text
 * is one "name=value\n" line per field starting with the format line, which names format 2
 * exactly when a run receipt carries a budget or counters; a receipt that verifies
 * still verifies when checked again, and stops verifying when its MAC's first digit changes.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "charter.h"
#include "charter.pb-c.h"
#include "receipt.h"

/* The integrity key the seed receipts in tests/fuzz/corpus/fuzz_receipt were signed under. */
static const unsigned char fuzz_key[] = "fuzz-integrity-key-0123456789abcdef-0123456789";

static void fuzz_fail(const char *why)
{
    fprintf(stderr, "fuzz_receipt: %s\n", why);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    Charter__V1__Receipt *r = charter__v1__receipt__unpack(NULL, size, data);
    if (r == NULL) {
        return 0;
    }
    const size_t keylen = sizeof fuzz_key - 1;
    char err[256];
    char *text = NULL;
    size_t len = 0;
    int trc = charter_receipt_text(r, &text, &len, err, sizeof err);
    char reason[256];
    int vrc = charter_receipt_verify(r, fuzz_key, keylen, reason, sizeof reason);
    if (trc != 0 && vrc == 0) {
        fuzz_fail("a receipt without a canonical text verified");
    }
    if (trc == 0) {
        bool run = r->kind != NULL && strcmp(r->kind, "run") == 0;
        bool carries = (r->budget != NULL && r->budget[0] != '\0') ||
                       (r->counters != NULL && r->counters[0] != '\0');
        const char *first = run && carries ? "format=" CHARTER_RECEIPT_FORMAT_2 "\n"
                                           : "format=" CHARTER_RECEIPT_FORMAT "\n";
        if (len != strlen(text) || strncmp(text, first, strlen(first)) != 0 || len == 0 ||
            text[len - 1] != '\n') {
            fuzz_fail("the canonical text is not name=value lines under the format line");
        }
        char mac[65];
        if (charter_receipt_mac(r, fuzz_key, keylen, mac, err, sizeof err) != 0) {
            fuzz_fail("a receipt with a canonical text has no MAC");
        }
        free(text);
    }
    if (vrc == 0) {
        if (charter_receipt_verify(r, fuzz_key, keylen, reason, sizeof reason) != 0) {
            fuzz_fail("a valid receipt stopped verifying");
        }
        char saved = r->mac[0];
        r->mac[0] = saved == '0' ? '1' : '0';
        if (charter_receipt_verify(r, fuzz_key, keylen, reason, sizeof reason) == 0) {
            fuzz_fail("a receipt with an altered MAC verified");
        }
        r->mac[0] = saved;
    }
    charter__v1__receipt__free_unpacked(r, NULL);
    return 0;
}
