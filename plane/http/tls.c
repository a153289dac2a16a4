/* http/tls.c: the plane's certificate, key and client-certificate checks
 * (see tls.h). */
#include "http/tls.h"
#include "core/nodes.h"
#include "core/tokens.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <gnutls/abstract.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CHAIN_MAX 16
#define PEM_MAX (1u << 20)

/* One loaded certificate chain and key. Never freed while the plane runs:
 * a handshake that began with it may still use it after a reload. */
struct creds {
	gnutls_pcert_st pcert[CHAIN_MAX];
	unsigned npcert;
	gnutls_privkey_t key;
	struct creds *older;
};

struct plane_tls {
	char *cert_path, *key_path, *ca_path;
	char *ca_pem;                          /* its text, as loaded */
	gnutls_certificate_credentials_t creds; /* every handshake's: certificate by callback, CA names */
	gnutls_priority_t prio;
	pthread_rwlock_t ca_lock;
	gnutls_x509_trust_list_t ca;           /* NULL: no client certificates */
	bool cert_roles;                       /* --cert-roles: OU=tether-ROLE makes a person */
};

/* The callback has no closure of ours: one plane per process. */
static pthread_mutex_t current_lock = PTHREAD_MUTEX_INITIALIZER;
static struct creds *current;

static void creds_free(struct creds *c)
{
	while (c) {
		struct creds *older = c->older;
		for (unsigned i = 0; i < c->npcert; i++)
			gnutls_pcert_deinit(&c->pcert[i]);
		if (c->key)
			gnutls_privkey_deinit(c->key);
		free(c);
		c = older;
	}
}

static int load_pem(const char *path, const char *what, gnutls_datum_t *d, char *err, size_t errlen)
{
	size_t len;
	/* read as a secret (a key file is one): no copy left behind */
	char *text = read_secret_file(path, PEM_MAX, &len);
	if (!text) {
		snprintf(err, errlen, "cannot read %s '%s': %s", what, path, strerror(errno));
		return -1;
	}
	d->data = (unsigned char *)text;
	d->size = (unsigned)len;
	return 0;
}

static void wipe_pem(gnutls_datum_t *d)
{
	if (d->data) {
		memset(d->data, 0, d->size);
		free(d->data);
	}
	d->data = NULL;
}

static struct creds *creds_load(const char *cert, const char *key, char *err, size_t errlen)
{
	gnutls_datum_t cd = { NULL, 0 }, kd = { NULL, 0 };
	gnutls_certificate_credentials_t probe = NULL;
	struct creds *c = xcalloc(1, sizeof(*c));
	int rc;
	if (load_pem(cert, "certificate", &cd, err, errlen) < 0 || load_pem(key, "key", &kd, err, errlen) < 0)
		goto fail;
	c->npcert = CHAIN_MAX;
	rc = gnutls_pcert_list_import_x509_raw(c->pcert, &c->npcert, &cd, GNUTLS_X509_FMT_PEM, 0);
	if (rc < 0 || c->npcert == 0) {
		c->npcert = 0;
		snprintf(err, errlen, "certificate '%s': %s", cert, rc < 0 ? gnutls_strerror(rc) : "no certificate in it");
		goto fail;
	}
	if ((rc = gnutls_privkey_init(&c->key)) < 0 ||
	    (rc = gnutls_privkey_import_x509_raw(c->key, &kd, GNUTLS_X509_FMT_PEM, NULL, 0)) < 0) {
		/* GnuTLS's message names the problem, never the key's bytes */
		snprintf(err, errlen, "key '%s': %s", key, gnutls_strerror(rc));
		goto fail;
	}
	/* the key must be the certificate's: GnuTLS checks the pair here */
	gnutls_certificate_allocate_credentials(&probe);
	rc = gnutls_certificate_set_x509_key_mem2(probe, &cd, &kd, GNUTLS_X509_FMT_PEM, NULL, 0);
	if (rc < 0) {
		snprintf(err, errlen, "certificate '%s' and key '%s' do not go together: %s", cert, key,
			 gnutls_strerror(rc));
		goto fail;
	}
	gnutls_certificate_free_credentials(probe);
	wipe_pem(&cd);
	wipe_pem(&kd);
	return c;
fail:
	if (probe)
		gnutls_certificate_free_credentials(probe);
	wipe_pem(&cd);
	wipe_pem(&kd);
	creds_free(c);
	return NULL;
}

static int retrieve(gnutls_session_t session, const gnutls_datum_t *req_ca_rdn, int nreqs,
		    const gnutls_pk_algorithm_t *algos, int nalgos, gnutls_pcert_st **pcert,
		    unsigned int *pcert_length, gnutls_privkey_t *privkey)
{
	(void)session;
	(void)req_ca_rdn;
	(void)nreqs;
	(void)algos;
	(void)nalgos;
	pthread_mutex_lock(&current_lock);
	struct creds *c = current;
	pthread_mutex_unlock(&current_lock);
	if (!c)
		return -1;
	*pcert = c->pcert;
	*pcert_length = c->npcert;
	*privkey = c->key;
	return 0;
}

static int load_ca(struct plane_tls *t, char *err, size_t errlen)
{
	gnutls_x509_trust_list_t list;
	gnutls_datum_t d = { NULL, 0 };
	if (load_pem(t->ca_path, "client CA", &d, err, errlen) < 0)
		return -1;
	gnutls_x509_trust_list_init(&list, 0);
	int n = gnutls_x509_trust_list_add_trust_mem(list, &d, NULL, GNUTLS_X509_FMT_PEM, 0, 0);
	if (n <= 0) {
		snprintf(err, errlen, "client CA '%s': %s", t->ca_path, n < 0 ? gnutls_strerror(n) : "no certificate in it");
		gnutls_x509_trust_list_deinit(list, 1);
		free(d.data);
		return -1;
	}
	pthread_rwlock_wrlock(&t->ca_lock);
	if (t->ca)
		gnutls_x509_trust_list_deinit(t->ca, 1);
	t->ca = list;
	free(t->ca_pem);
	t->ca_pem = (char *)d.data;
	pthread_rwlock_unlock(&t->ca_lock);
	return 0;
}

/* TLS 1.3 and 1.2, AEAD ciphers only, in the plane's order of preference
 * (%SERVER_PRECEDENCE): AES-128-GCM first, whose TLS 1.3 suite runs its
 * key schedule on SHA-256 (SHA-NI where the CPU has it) instead of
 * AES-256-GCM's SHA-384 in software, the largest cost of a resumed
 * handshake after its ECDHE; X25519 first among the groups, the one share
 * OpenSSL clients (tetherd's libcurl) send. No CBC, no finite-field DH. */
#define TLS_PRIORITY                                                                             \
	"NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2:-KX-ALL:+ECDHE-ECDSA:+ECDHE-RSA:"                                          \
	"-CIPHER-ALL:+AES-128-GCM:+CHACHA20-POLY1305:+AES-256-GCM:+AES-128-CCM:+AES-256-CCM:"    \
	"-GROUP-ALL:+GROUP-X25519:+GROUP-SECP256R1:+GROUP-SECP384R1:+GROUP-SECP521R1:+GROUP-X448:" \
	"%SERVER_PRECEDENCE"

struct plane_tls *tls_open(const char *cert, const char *key, const char *client_ca, char *err, size_t errlen)
{
	struct plane_tls *t = xcalloc(1, sizeof(*t));
	t->cert_path = xstrdup(cert);
	t->key_path = xstrdup(key);
	t->ca_path = client_ca ? xstrdup(client_ca) : NULL;
	pthread_rwlock_init(&t->ca_lock, NULL);
	if (tls_reload(t, err, errlen) < 0) {
		tls_free(t);
		return NULL;
	}
	int rc;
	if ((rc = gnutls_certificate_allocate_credentials(&t->creds)) < 0 ||
	    (rc = gnutls_priority_init(&t->prio, TLS_PRIORITY, NULL)) < 0) {
		snprintf(err, errlen, "TLS: %s", gnutls_strerror(rc));
		tls_free(t);
		return NULL;
	}
	gnutls_certificate_set_retrieve_function2(t->creds, retrieve);
	if (t->ca_pem) {
		/* the CertificateRequest names the CA; verification is per
		 * request (tls_peer_node), against the CA as loaded now */
		gnutls_datum_t d = { (unsigned char *)t->ca_pem, (unsigned)strlen(t->ca_pem) };
		if ((rc = gnutls_certificate_set_x509_trust_mem(t->creds, &d, GNUTLS_X509_FMT_PEM)) < 0) {
			snprintf(err, errlen, "client CA '%s': %s", client_ca, gnutls_strerror(rc));
			tls_free(t);
			return NULL;
		}
	}
	return t;
}

int tls_reload(struct plane_tls *t, char *err, size_t errlen)
{
	struct creds *c = creds_load(t->cert_path, t->key_path, err, errlen);
	if (!c)
		return -1;
	if (t->ca_path && load_ca(t, err, errlen) < 0) {
		creds_free(c);
		return -1;
	}
	pthread_mutex_lock(&current_lock);
	c->older = current;
	current = c;
	pthread_mutex_unlock(&current_lock);
	return 0;
}

void tls_free(struct plane_tls *t)
{
	if (!t)
		return;
	pthread_mutex_lock(&current_lock);
	creds_free(current);
	current = NULL;
	pthread_mutex_unlock(&current_lock);
	if (t->ca)
		gnutls_x509_trust_list_deinit(t->ca, 1);
	if (t->creds)
		gnutls_certificate_free_credentials(t->creds);
	if (t->prio)
		gnutls_priority_deinit(t->prio);
	pthread_rwlock_destroy(&t->ca_lock);
	free(t->ca_pem);
	free(t->cert_path);
	free(t->key_path);
	free(t->ca_path);
	free(t);
}

void *tls_credentials(struct plane_tls *t)
{
	return t->creds;
}

void *tls_priority(struct plane_tls *t)
{
	return t->prio;
}

const char *tls_client_ca_pem(struct plane_tls *t)
{
	return t && t->ca_path ? t->ca_pem : NULL;
}

void tls_set_cert_roles(struct plane_tls *t, bool on)
{
	if (t)
		t->cert_roles = on;
}

/* The role an OU names (ROLE_NODE: none of ours), -1 for two OUs that do. */
static int ou_role(gnutls_x509_crt_t crt)
{
	static const struct { const char *ou; enum role role; } roles[] = {
		{ "tether-admin", ROLE_ADMIN }, { "tether-operator", ROLE_OPERATOR }, { "tether-reader", ROLE_READER },
		{ "tether-relay", ROLE_RELAY },
	};
	int found = ROLE_NODE;
	for (unsigned i = 0;; i++) {
		char ou[128];
		size_t len = sizeof(ou);
		if (gnutls_x509_crt_get_dn_by_oid(crt, GNUTLS_OID_X520_ORGANIZATIONAL_UNIT_NAME, i, 0, ou, &len) < 0)
			return found;
		for (size_t k = 0; k < sizeof(roles) / sizeof(roles[0]); k++) {
			if (strlen(ou) == len && strcmp(ou, roles[k].ou) == 0) {
				if (found != ROLE_NODE)
					return -1;
				found = (int)roles[k].role;
			}
		}
	}
}

bool tls_session_cert_usable(void *session)
{
	return !gnutls_session_is_resumed(session);
}

int tls_peer_node(struct plane_tls *t, struct http_conn *c, char *cn, size_t cap, int *role, char *err,
		  size_t errlen)
{
	if (role)
		*role = ROLE_NODE;
	if (!t || !t->ca_path)
		return 0;
	gnutls_session_t s = http_tls_session(c);
	if (!s)
		return 0;
	unsigned n = 0;
	const gnutls_datum_t *raw = gnutls_certificate_get_peers(s, &n);
	if (!raw || n == 0)
		return 0;
	if (!tls_session_cert_usable(s)) {
		/* the plane gives no ticket to a session with a client
		 * certificate, so an honest client never gets here */
		log_info("http: a resumed TLS session carries a client certificate: ignored (the caller has none)");
		return 0;
	}
	if (n > CHAIN_MAX)
		n = CHAIN_MAX;
	gnutls_x509_crt_t chain[CHAIN_MAX];
	unsigned got = 0;
	int rc = -1;
	for (; got < n; got++) {
		if (gnutls_x509_crt_init(&chain[got]) < 0)
			break;
		if (gnutls_x509_crt_import(chain[got], &raw[got], GNUTLS_X509_FMT_DER) < 0) {
			gnutls_x509_crt_deinit(chain[got]);
			break;
		}
	}
	if (got != n) {
		snprintf(err, errlen, "client certificate: cannot be parsed");
		goto out;
	}
	gnutls_typed_vdata_st purpose = { GNUTLS_DT_KEY_PURPOSE_OID, (unsigned char *)GNUTLS_KP_TLS_WWW_CLIENT, 0 };
	unsigned status = 0;
	pthread_rwlock_rdlock(&t->ca_lock);
	int vr = gnutls_x509_trust_list_verify_crt2(t->ca, chain, n, &purpose, 1, 0, &status, NULL);
	pthread_rwlock_unlock(&t->ca_lock);
	if (vr < 0 || status != 0) {
		gnutls_datum_t msg = { NULL, 0 };
		if (vr >= 0 && gnutls_certificate_verification_status_print(status, GNUTLS_CRT_X509, &msg, 0) >= 0) {
			snprintf(err, errlen, "client certificate: %s", (const char *)msg.data);
			gnutls_free(msg.data);
			size_t el = strlen(err);
			while (el && (err[el - 1] == ' ' || err[el - 1] == '.'))
				err[--el] = '\0';
		} else {
			snprintf(err, errlen, "client certificate: %s", vr < 0 ? gnutls_strerror(vr) : "not trusted");
		}
		goto out;
	}
	size_t len = cap, more = 0;
	char extra[8];
	if (gnutls_x509_crt_get_dn_by_oid(chain[0], GNUTLS_OID_X520_COMMON_NAME, 0, 0, cn, &len) < 0 || !len) {
		snprintf(err, errlen, "client certificate: its subject has no CN (the node id)");
		goto out;
	}
	/* one CN, a whole node id: no NUL inside, no second CN to choose from */
	more = sizeof(extra);
	if (strlen(cn) != len || !nodes_id_valid(cn) ||
	    gnutls_x509_crt_get_dn_by_oid(chain[0], GNUTLS_OID_X520_COMMON_NAME, 1, 0, extra, &more) !=
		    GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE) {
		snprintf(err, errlen, "client certificate: its subject must hold exactly one CN, a node id "
			 "([A-Za-z0-9._-]{1,200})");
		goto out;
	}
	if (t->cert_roles) {
		int r = ou_role(chain[0]);
		if (r < 0) {
			snprintf(err, errlen, "client certificate: its subject names two roles (OU=tether-...)");
			goto out;
		}
		if (role)
			*role = r;
	}
	rc = 1;
out:
	for (unsigned i = 0; i < got; i++)
		gnutls_x509_crt_deinit(chain[i]);
	return rc;
}
