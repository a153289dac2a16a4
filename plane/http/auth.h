/* http/auth.h: who is asking, and may they. A caller is identified by a bearer
 * token (the bootstrap admin token of --admin-token-file, or a token the
 * store issued: a node's or a person's role) or, without one, by a client
 * certificate under --client-ca (a node: the subject's CN; with
 * --cert-roles, a person when its OU is tether-admin, tether-operator or
 * tether-reader). Without any, it is anonymous.
 *
 * What each needs (docs/security.md):
 *   node endpoints (stream, config, ack) for node X: X's own credential;
 *   reads (resources, nodes, rollouts, metrics): reader or above;
 *   rollout abort: operator or above; writes and tokens: admin;
 *   relay endpoints (a relay's stream, node records, statements): relay
 *   or admin (a relay otherwise reads as a reader).
 * Refusals: 401 without a credential (or with one that does not verify),
 * 403 with one that does not grant this; each is counted by reason. Under
 * --insecure an anonymous caller keeps the open access of a lab: reads,
 * any node's sync, and writes unless --admin-token-file is set. */
#ifndef TETHER_AUTH_H
#define TETHER_AUTH_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include "net/httpd.h"

#include "buf.h"
#include "core/tokens.h"

struct plane_tls;

struct principal {
	enum role role;                     /* ROLE_NONE: anonymous */
	bool anonymous;
	char node[201];                     /* ROLE_NODE: the node it is */
	char token_id[TOKEN_ID_LEN + 1];    /* a store token's id, else "" */
	char who[320];                      /* for logs: never a secret */
	char author[320];                   /* for the version log: never a secret */
	bool by_cert;                       /* identified by its client certificate */
	bool session;                       /* a console session's token (a reader's that expires) */
};

enum auth_refusal {
	REFUSED_NO_CREDENTIAL,
	REFUSED_BAD_TOKEN,
	REFUSED_REVOKED,
	REFUSED_BAD_CERT,
	REFUSED_WRONG_NODE,
	REFUSED_ROLE,
	REFUSED_EXPIRED,
	REFUSED_N
};

/* What auth reads: the plane fills it at start-up (and the admin token on
 * SIGHUP, under token_lock). */
struct auth {
	bool insecure;                 /* --insecure: open reads, anonymous nodes */
	struct tokens *tokens;         /* the tokens the store issued */
	struct plane_tls *tls;         /* NULL: plain HTTP (no client certificates) */
	pthread_mutex_t token_lock;
	char *admin_token;             /* --admin-token-file's; NULL: none */
	atomic_uint_fast64_t refused[REFUSED_N];
};

/* Requires role need (ROLE_READER, ROLE_OPERATOR or ROLE_ADMIN). Fills
 * who; on refusal sends 401 or 403 (*ret) and returns false. */
bool auth_allow(struct auth *a, struct http_conn *c, enum role need, struct principal *who,
		enum http_result *ret);
/* Requires the credential of node (stream, poll, ack). */
bool auth_allow_node(struct auth *a, struct http_conn *c, const char *node, struct principal *who,
		     enum http_result *ret);
/* Requires a relay's credential (the relay role, or admin): the relay
 * stream carries every secret in clear and the token records' hashes. */
bool auth_allow_relay(struct auth *a, struct http_conn *c, struct principal *who, enum http_result *ret);
/* Sealed secrets: a node's own credential or an admin's (a node's key),
 * and any credential that checks out, of a node or a role (GET /v1/wraps;
 * anonymous only with --insecure). */
bool auth_allow_node_or_admin(struct auth *a, struct http_conn *c, const char *node, struct principal *who,
			      enum http_result *ret);
bool auth_allow_any(struct auth *a, struct http_conn *c, struct principal *who, enum http_result *ret);
/* What a route needs, known from its method and path alone. */
enum auth_gate {
	GATE_OPEN,       /* /healthz, the console's files */
	GATE_ANY,        /* a credential that checks out (or --insecure) */
	GATE_OPERATOR,   /* and the operator role or above */
	GATE_ADMIN,      /* and admin */
	GATE_NODE,       /* a node's own credential (which node: the body says) */
	GATE_RELAY,      /* the relay role, or admin */
};
/* On the headers, before any body is read: refuses (401 or 403, *ret) a
 * credential that does not check out, none at all where one is needed,
 * and one that cannot pass gate. Returns false when refused. */
bool auth_precheck(struct auth *a, struct http_conn *c, enum auth_gate gate, enum http_result *ret);
/* Whether the plane speaks TLS (its links are https). */
bool auth_is_tls(const struct auth *a);
/* Whether who may see a secret's key material (admins, and anonymous
 * callers of an --insecure plane, as before roles existed). */
bool auth_sees_secrets(const struct principal *who);

/* Who made a write, for the version log (into out, never a secret): the
 * token's name and role (its id without a name), "admin token", or
 * "anonymous"; a client certificate presented beside it adds its subject
 * ("alice (admin token) with certificate CN=ops-laptop"). */
void auth_author(struct auth *a, struct http_conn *c, const struct principal *who, char *out, size_t cap);

/* Appends tether_auth_refused_total{reason} to /metrics. */
void auth_metrics(struct auth *a, struct buf *out);

#endif
