/* Ranks agree or fail together. Every collective entry point first validates its
 * arguments locally, then calls gaaw_agree over the group that shares the work,
 * before any data moves: one small all-reduce of each rank's status and of a hash
 * of the fields that must match. So a rank with bad input, or with arguments that
 * differ from its peers', makes every rank of the group return the same named
 * error at once, instead of leaving the others in a collective it never joins.
 * Only when something is wrong do more rounds find out what: the failing rank's
 * message is broadcast, or the first differing field is reported by name with each
 * rank's value ("dim: 32 on rank 0, 64 on rank 1"). */
#ifndef GAAW_BACKENDS_AGREE_H
#define GAAW_BACKENDS_AGREE_H

#include <stddef.h>
#include <stdint.h>

#include "gaaw/comm.h"

typedef enum {
  GAAW_FIELD_KIND_INT,    /* an integer, printed as such */
  GAAW_FIELD_KIND_REAL,   /* a double, compared by its bits */
  GAAW_FIELD_KIND_FLOAT,  /* a float (held in r), compared by its bits as a float */
  GAAW_FIELD_KIND_NAMED,  /* an enumeration value, compared as an integer, printed by its label */
  GAAW_FIELD_KIND_TEXT,   /* a string */
  GAAW_FIELD_KIND_DIGEST, /* a hash of data (gaaw_digest), printed in hex */
} gaaw_field_kind;

/* One argument that must be the same on every rank of a group. */
typedef struct gaaw_field_s {
  const char *name;  /* as the user knows it: "dim", "zero_stage", "tokens" */
  gaaw_field_kind kind;
  int64_t i;         /* INT, NAMED, DIGEST */
  double r;          /* REAL, FLOAT */
  const char *text;  /* TEXT (NULL is the empty text); NAMED: the value's label */
} gaaw_field;

#define GAAW_FIELD_INT(name, v) ((gaaw_field){(name), GAAW_FIELD_KIND_INT, (int64_t)(v), 0.0, NULL})
#define GAAW_FIELD_REAL(name, v) ((gaaw_field){(name), GAAW_FIELD_KIND_REAL, 0, (double)(v), NULL})
#define GAAW_FIELD_FLOAT(name, v) ((gaaw_field){(name), GAAW_FIELD_KIND_FLOAT, 0, (double)(float)(v), NULL})
#define GAAW_FIELD_NAMED(name, v, label) ((gaaw_field){(name), GAAW_FIELD_KIND_NAMED, (int64_t)(v), 0.0, (label)})
#define GAAW_FIELD_TEXT(name, s) ((gaaw_field){(name), GAAW_FIELD_KIND_TEXT, 0, 0.0, (s)})
#define GAAW_FIELD_DIGEST(name, h) ((gaaw_field){(name), GAAW_FIELD_KIND_DIGEST, (int64_t)(h), 0.0, NULL})

/* The most fields one agreement compares. */
#define GAAW_AGREE_MAX_FIELDS 64

/* A 64-bit hash of bytes, for fields that stand for data (a batch's tokens). */
uint64_t gaaw_digest(const void *data, size_t bytes);

/* Collective over group. local is this rank's own verdict on its arguments (an
 * error already raised in ctx's report, or GAAW_SUCCESS); fields[0..n) must match
 * on every rank (n <= GAAW_AGREE_MAX_FIELDS; a failing rank may pass n = 0). what
 * names the call for messages ("the GPT configuration"). Returns, on every rank:
 * - GAAW_SUCCESS when every rank succeeded and the fields match;
 * - on a rank that failed, its own error; on the others the worst status of the
 *   group, with the message of the lowest failing rank;
 * - GAAW_ERR_INVALID_ARG naming the first field that differs and every value;
 * - GAAW_ERR_COMM or GAAW_ERR_TIMEOUT when the agreement itself cannot complete
 *   (the context is then aborted).
 * With a group of one rank it returns local without communicating. */
gaaw_status_t gaaw_agree(gaaw_comm_t group, gaaw_status_t local, const char *what, const gaaw_field *fields, int n);

/* A value that may differ between the slots of a group (its data-parallel
 * replicas) but must be the same on every rank of one slot (a replica's tp x pp
 * ranks): every rank learns every slot's value in the agreement's own round. */
typedef struct {
  const char *name;      /* as the user knows it: "batch" */
  const char *slot_name; /* what a slot is: "dp rank" */
  int slot, slots;       /* this rank's slot (0..slots-1), and how many; each slot has ranks */
  int64_t value;         /* this rank's */
  int64_t *values;       /* out: slots entries, each slot's value (filled on success) */
} gaaw_agree_slots;

/* gaaw_agree, and s's value agreed per slot in the same all-reduce (2 x slots
 * more integers): GAAW_ERR_INVALID_ARG on every rank naming s->name, the slot and
 * its values when the ranks of a slot differ. Collective over group. */
gaaw_status_t gaaw_agree_slotted(gaaw_comm_t group, gaaw_status_t local, const char *what, const gaaw_field *fields,
                                 int n, gaaw_agree_slots *s);

/* The same over every rank of the context's world, also before its topology
 * exists (gaaw_init). Collective over world. */
gaaw_status_t gaaw_agree_world(gaaw_context_t ctx, gaaw_status_t local, const char *what, const gaaw_field *fields,
                               int n);

#endif
