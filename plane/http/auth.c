/* http/auth.c: identifying callers and allowing or refusing them (see auth.h). */
#include "http/auth.h"
#include "freeze.h"
#include "http/http.h"
#include "http/tls.h"
#include "log.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static const char *const refusal_names[REFUSED_N] = {
	"no_credential", "bad_token", "revoked", "bad_certificate", "wrong_node", "role", "expired",
};

static enum http_result refuse(struct auth *a, struct http_conn *c, unsigned status, enum auth_refusal why,
			      const char *who, const char *msg)
{
	atomic_fetch_add(&a->refused[why], 1);
	log_info("auth: %u refused (%s) %s: %s", status, refusal_names[why], who, msg);
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"error\":");
	buf_json_string(&b, msg);
	buf_puts(&b, "}\n");
	const char *const challenge[] = { HTTP_HEADER_WWW_AUTHENTICATE, "Bearer realm=\"tether\"", NULL };
	return http_send_headers(c, status, "application/json", &b, false,
				 status == HTTP_UNAUTHORIZED ? challenge : NULL);
}

/* Works out who is asking. Returns 0, or -1 after sending 401 for a
 * credential that does not verify (an unknown or revoked token, a bad
 * certificate): a bad credential never falls back to anonymous. */
static int identify(struct auth *a, struct http_conn *c, struct principal *who, enum http_result *ret)
{
	memset(who, 0, sizeof(*who));
	const char *h = http_header(c, HTTP_HEADER_AUTHORIZATION);
	if (h) {
		if (strncasecmp(h, "Bearer ", 7) != 0 || !h[7]) {
			*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_BAD_TOKEN, "a caller",
				      "Authorization must be 'Bearer TOKEN' (the admin token, or a token the plane issued)");
			return -1;
		}
		const char *tok = h + 7;
		bool admin = false;
		pthread_mutex_lock(&a->token_lock);
		admin = a->admin_token && str_secret_equal(tok, a->admin_token);
		pthread_mutex_unlock(&a->token_lock);
		if (admin) {
			who->role = ROLE_ADMIN;
			snprintf(who->who, sizeof(who->who), "the admin token (--admin-token-file)");
			snprintf(who->author, sizeof(who->author), "admin token");
			return 0;
		}
		struct token_info ti;
		if (!tokens_lookup(a->tokens, tok, &ti)) {
			*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_BAD_TOKEN, "a caller",
				      "unknown token (neither the admin token nor one the plane issued)");
			return -1;
		}
		if (ti.revoked) {
			char msg[64];
			snprintf(msg, sizeof(msg), "token %s is revoked", ti.id);
			*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_REVOKED, ti.id, msg);
			return -1;
		}
		if (tokens_expired(&ti, wall_seconds())) {
			char msg[160], when[32];
			freeze_time_text(ti.expires, when);
			snprintf(msg, sizeof(msg), "token %s expired at %s (a console session: 'tetherctl ui' makes a new one)",
				 ti.id, when);
			*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_EXPIRED, ti.id, msg);
			return -1;
		}
		who->role = ti.role;
		who->session = ti.session;
		snprintf(who->token_id, sizeof(who->token_id), "%s", ti.id);
		snprintf(who->node, sizeof(who->node), "%s", ti.node);
		if (ti.role == ROLE_NODE)
			snprintf(who->who, sizeof(who->who), "token %s (node %s)", ti.id, ti.node);
		else
			snprintf(who->who, sizeof(who->who), "token %s (%s%s%.200s)", ti.id, role_name(ti.role),
				 ti.name[0] ? ", " : "", ti.name);
		if (ti.name[0])
			snprintf(who->author, sizeof(who->author), "%.200s (%s token)", ti.name, role_name(ti.role));
		else
			snprintf(who->author, sizeof(who->author), "%s token %s", role_name(ti.role), ti.id);
		return 0;
	}
	char cn[201], err[512];
	int role = ROLE_NODE;
	int r = tls_peer_node(a->tls, c, cn, sizeof(cn), &role, err, sizeof(err));
	if (r < 0) {
		*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_BAD_CERT, "a caller", err);
		return -1;
	}
	if (r == 1 && role != ROLE_NODE) {
		/* --cert-roles: a person's certificate, its OU the role */
		who->role = (enum role)role;
		who->by_cert = true;
		snprintf(who->who, sizeof(who->who), "certificate CN=%s (%s)", cn, role_name(who->role));
		snprintf(who->author, sizeof(who->author), "%s (%s certificate)", cn, role_name(who->role));
		return 0;
	}
	if (r == 1) {
		who->by_cert = true;
		who->role = ROLE_NODE;
		snprintf(who->node, sizeof(who->node), "%s", cn);
		snprintf(who->who, sizeof(who->who), "certificate CN=%s", cn);
		snprintf(who->author, sizeof(who->author), "certificate CN=%s", cn);
		return 0;
	}
	who->anonymous = true;
	snprintf(who->who, sizeof(who->who), "anonymous");
	snprintf(who->author, sizeof(who->author), "anonymous");
	return 0;
}

bool auth_allow(struct auth *a, struct http_conn *c, enum role need, struct principal *who,
		enum http_result *ret)
{
	if (identify(a, c, who, ret) < 0)
		return false;
	if (who->anonymous) {
		if (a->insecure) {
			bool has_admin;
			pthread_mutex_lock(&a->token_lock);
			has_admin = a->admin_token != NULL;
			pthread_mutex_unlock(&a->token_lock);
			/* a lab: reads are open, and so are writes unless an admin
			 * token is set */
			if (need <= ROLE_READER || !has_admin)
				return true;
			*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_NO_CREDENTIAL, who->who,
				      "this needs 'Authorization: Bearer TOKEN' with an admin token");
			return false;
		}
		*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_NO_CREDENTIAL, who->who,
			      "this needs a credential: 'Authorization: Bearer TOKEN' (see docs/security.md)");
		return false;
	}
	/* a relay reads as a reader does, and nothing more */
	enum role has = who->role == ROLE_RELAY ? ROLE_READER : who->role;
	if (who->role == ROLE_NODE || has < need) {
		char msg[128];
		snprintf(msg, sizeof(msg), "this needs the %s role; %s does not have it", role_name(need),
			 who->role == ROLE_NODE ? "a node's credential" : role_name(who->role));
		*ret = refuse(a, c, HTTP_FORBIDDEN, REFUSED_ROLE, who->who, msg);
		return false;
	}
	return true;
}

bool auth_allow_node(struct auth *a, struct http_conn *c, const char *node, struct principal *who,
		     enum http_result *ret)
{
	if (identify(a, c, who, ret) < 0)
		return false;
	if (who->anonymous) {
		if (a->insecure)
			return true;
		*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_NO_CREDENTIAL, who->who,
			      "a node needs its credential: its token or its client certificate");
		return false;
	}
	if (who->role != ROLE_NODE) {
		*ret = refuse(a, c, HTTP_FORBIDDEN, REFUSED_ROLE, who->who,
			      "only a node's own credential may sync or acknowledge as that node");
		return false;
	}
	if (strcmp(who->node, node) != 0) {
		char msg[512];
		snprintf(msg, sizeof(msg), "this credential is node %.200s's, not %.200s's", who->node, node);
		*ret = refuse(a, c, HTTP_FORBIDDEN, REFUSED_WRONG_NODE, who->who, msg);
		return false;
	}
	return true;
}

bool auth_allow_node_or_admin(struct auth *a, struct http_conn *c, const char *node, struct principal *who,
			      enum http_result *ret)
{
	if (identify(a, c, who, ret) < 0)
		return false;
	if (!who->anonymous && who->role == ROLE_ADMIN)
		return true;
	return auth_allow_node(a, c, node, who, ret);
}

bool auth_allow_any(struct auth *a, struct http_conn *c, struct principal *who, enum http_result *ret)
{
	if (identify(a, c, who, ret) < 0)
		return false;
	if (who->anonymous && !a->insecure) {
		*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_NO_CREDENTIAL, who->who,
			      "this needs a credential: a node's or a role's (see docs/security.md)");
		return false;
	}
	return true;
}

bool auth_allow_relay(struct auth *a, struct http_conn *c, struct principal *who, enum http_result *ret)
{
	if (identify(a, c, who, ret) < 0)
		return false;
	if (who->anonymous) {
		if (a->insecure)
			return true;
		*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_NO_CREDENTIAL, who->who,
			      "a relay needs its credential: a relay token (tetherctl token create --role relay)");
		return false;
	}
	if (who->role != ROLE_RELAY && who->role != ROLE_ADMIN) {
		*ret = refuse(a, c, HTTP_FORBIDDEN, REFUSED_ROLE, who->who,
			      "this needs the relay role (or admin)");
		return false;
	}
	return true;
}

bool auth_precheck(struct auth *a, struct http_conn *c, enum auth_gate gate, enum http_result *ret)
{
	struct principal who;
	switch (gate) {
	case GATE_OPEN:
		return true;
	case GATE_OPERATOR:
		return auth_allow(a, c, ROLE_OPERATOR, &who, ret);
	case GATE_ADMIN:
		return auth_allow(a, c, ROLE_ADMIN, &who, ret);
	case GATE_RELAY:
		return auth_allow_relay(a, c, &who, ret);
	case GATE_NODE:
		if (identify(a, c, &who, ret) < 0)
			return false;
		if (who.anonymous && !a->insecure) {
			*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_NO_CREDENTIAL, who.who,
				      "a node needs its credential: its token or its client certificate");
			return false;
		}
		if (!who.anonymous && who.role != ROLE_NODE) {
			*ret = refuse(a, c, HTTP_FORBIDDEN, REFUSED_ROLE, who.who,
				      "only a node's own credential may sync or acknowledge as that node");
			return false;
		}
		return true;
	case GATE_ANY:
		break;
	}
	if (identify(a, c, &who, ret) < 0)
		return false;
	if (!who.anonymous || a->insecure)
		return true;
	*ret = refuse(a, c, HTTP_UNAUTHORIZED, REFUSED_NO_CREDENTIAL, "anonymous",
		      "this needs a credential: 'Authorization: Bearer TOKEN' (see docs/security.md)");
	return false;
}

void auth_author(struct auth *a, struct http_conn *c, const struct principal *who, char *out, size_t cap)
{
	char cn[201], err[512];
	if (!who->by_cert && tls_peer_node(a->tls, c, cn, sizeof(cn), NULL, err, sizeof(err)) == 1)
		snprintf(out, cap, "%.250s with certificate CN=%s", who->author, cn);
	else
		snprintf(out, cap, "%s", who->author);
}

bool auth_sees_secrets(const struct principal *who)
{
	return who->role == ROLE_ADMIN || who->anonymous;
}

void auth_metrics(struct auth *a, struct buf *out)
{
	buf_puts(out, "# HELP tether_auth_refused_total Requests refused: 401 (no or a bad credential) and 403 "
		      "(a credential that does not grant it), by reason.\n"
		      "# TYPE tether_auth_refused_total counter\n");
	for (int i = 0; i < REFUSED_N; i++)
		buf_printf(out, "tether_auth_refused_total{reason=\"%s\"} %llu\n", refusal_names[i],
			   (unsigned long long)atomic_load(&a->refused[i]));
}

bool auth_is_tls(const struct auth *a)
{
	return a->tls != NULL;
}
