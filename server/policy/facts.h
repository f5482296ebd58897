/*
 * facts.h - the codec between the JSON facts the query library returns (and the snapshots
 * recorded from them) and the guard's structs.
 *
 * Decoding is no database access: the store decodes the replies it reads with these
 * functions, and replay decodes recorded snapshots with the very same ones, so a replay
 * never needs a connection. Each struct is described by one field table in facts.c.
 */
#ifndef CHARTER_FACTS_H
#define CHARTER_FACTS_H

#include <jansson.h>

#include "policy/guard.h"
#include "core/status.h"

/* Every result is owned by the caller and freed by the matching _free.
 *
 * The decoders fill every field: a text that is absent in the reply is "" (never NULL, so the
 * guard can compare it), a label that is absent is -1, a kind other than source/derived has
 * kind_known false, an absent list is empty, and a list encoded as {} (Redis cjson's empty
 * list) is an empty list. A grant's times are accepted as numbers or decimal strings; an
 * absent valid_from reads as +infinity and an absent valid_to as 0 (never valid: fails
 * closed), an absent revoked_at as 0. A field of the wrong type is STATUS_EPROTO. On any
 * failure the output is freed and zeroed. The _free functions are safe on a zeroed struct and
 * zero what they free. Each decoder returns STATUS_OK, STATUS_EPROTO or STATUS_ENOMEM. */

/* j is a charter_ancestry reply {root, truncated, artifacts:[...]}; root names the artifact
 * asked for, or NULL to take the reply's "root". */
int facts_ancestry_from_json(const json_t *j, const char *root, guard_ancestry *out);
void facts_ancestry_free(guard_ancestry *anc);

/* j is a charter_grant_chain reply {leaf, grants:[...]}; leaf names the grant asked for, or
 * NULL to take the reply's "leaf". */
int facts_chain_from_json(const json_t *j, const char *leaf, guard_chain *out);
void facts_chain_free(guard_chain *chain);

/* j is a charter_lineage_summary reply with a summary {id, summary, summary_hash, artifact,
 * parents, resources, sources}; id names the artifact asked for (NULL: any). verified is true
 * only when the summary's text has the SHA-1 summary_hash and is a summary of that artifact;
 * otherwise only the facts of now are filled. A reply charterd marked unusable (a string
 * "unverified": no summary, no seal, or a seal that does not verify; gate.h
 * gate_summary_verify) gives only its id and unverified, never verified. */
int facts_summary_from_json(const json_t *j, const char *id, guard_summary *out);
void facts_summary_free(guard_summary *s);
/* True when j is a charter_lineage_summary reply that holds a summary, or one charterd marked
 * unusable ("unverified"): the lineage is decided from it, never walked. */
bool facts_is_summary(const json_t *j);

/* j is a charter_context_owner reply {id, run_id, step, owners}. */
int facts_context_from_json(const json_t *j, guard_context *out);
void facts_context_free(guard_context *ctx);

#endif
