/* secrets.h: tetherctl's sealed-secret steps that need the plane, shared by
 * put --seal and the secrets commands (cmd_secrets.c) and sync
 * (sync_seal.c). The network-free parts are in sealer.h. */
#ifndef TETHER_CTL_SECRETS_H
#define TETHER_CTL_SECRETS_H

#include <stddef.h>

#include "commands.h"
#include "sealer.h"
#include "tree.h"

/* GET /v1/secrets into f. Returns 0, or 1 after printing why. */
int secrets_fetch(const struct ctl_ctx *cx, struct sealer_fleet *f);

/* sync's sealing of the tree's secrets against the plane's stored bodies
 * (names sorted, canonical; n of them): each secret entry's body becomes
 * what sync sends -- the plane's own text when nothing changed, else the
 * stored form sealed (sync_seal.c has the rules). Returns 0, or 1 after
 * printing why (naming the file). */
int sync_seal(const struct ctl_ctx *cx, struct tree *t, size_t n, char *const *names, char *const *bodies);
/* The same rules without the network: f the plane's GET /v1/secrets (all
 * zero for a plane without it), r --recovery-key (NULL: none). */
int sync_seal_rules(const struct sealer_fleet *f, const struct sealer_recovery *r, struct tree *t, size_t n,
		    char *const *names, char *const *bodies);

#endif
