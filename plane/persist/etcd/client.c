/* persist/etcd/client.c: etcd's JSON gateway over libcurl (see persist/etcd/client.h).
 * Requests go to the endpoint that answered last and move on when it
 * cannot be reached. The watch thread reads the gateway's stream of JSON
 * messages, one per line, and checks every check_s that a silent watch is
 * not a dead one: when the newest revision under the prefix is past what
 * it delivered, it reopens from the last revision delivered plus one
 * (seed 002: never from a newer one).
 * With --etcd-token-file, etcd's own auth: the token /v3/auth/authenticate
 * gives goes in every request's Authorization header; a token etcd no
 * longer knows (expired: --auth-token-ttl counts per member; a member
 * restarted) is replaced and the request made once more. The password and
 * the token never reach a log line or an error; refusals (TLS, auth,
 * permission) are told in an operator's words, naming the option to look
 * at. */
#include "persist/etcd/client.h"
#include "alive.h"
#include "buf.h"
#include "log.h"
#include "persist/records_json.h"
#include "urllist.h"
#include "util.h"
#include "xmalloc.h"

#include <curl/curl.h>
#include <errno.h>
#include <pthread.h>
#include <sodium.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#define MAX_ENDPOINTS 16
#define TOKEN_FILE_MAX 4096
#define AUTH_PATH "/v3/auth/authenticate"
#define MAX_ANSWER (64u << 20)
#define RANGE_PAGE 1000

struct etcd {
	char *endpoints[MAX_ENDPOINTS];
	size_t n;
	_Atomic size_t current;
	char *ca, *cert, *key;
	char *user, *password;
	char *token_file;            /* named in errors */
	pthread_mutex_t auth_lock;   /* the three below */
	char *auth_token;            /* etcd's, after /v3/auth/authenticate */
	bool auth_off;               /* etcd said its auth is not enabled */
	bool authenticated;          /* once: logged */
	double timeout_s;
};

static void free_secret_str(char *s)
{
	if (s) {
		sodium_memzero(s, strlen(s));
		free(s);
	}
}

char *etcd_b64(const void *p, size_t n)
{
	size_t cap = sodium_base64_ENCODED_LEN(n, sodium_base64_VARIANT_ORIGINAL);
	char *out = xmalloc(cap);
	sodium_bin2base64(out, cap, p, n, sodium_base64_VARIANT_ORIGINAL);
	return out;
}

char *etcd_unb64(const char *s, size_t *n)
{
	size_t len = strlen(s), cap = len / 4 * 3 + 3;
	char *out = xmalloc(cap + 1);
	size_t got = 0;
	if (sodium_base642bin((unsigned char *)out, cap, s, len, NULL, &got, NULL, sodium_base64_VARIANT_ORIGINAL) != 0) {
		free(out);
		return NULL;
	}
	out[got] = '\0';
	if (n)
		*n = got;
	return out;
}

char *etcd_prefix_end_b64(const char *prefix)
{
	size_t n = strlen(prefix);
	char *end = xstrdup(prefix);
	/* the first key past every key with this prefix: the last byte + 1 */
	while (n > 0 && (unsigned char)end[n - 1] == 0xff)
		n--;
	if (n == 0) {
		free(end);
		return etcd_b64("\0", 1);   /* everything */
	}
	end[n - 1] = (char)((unsigned char)end[n - 1] + 1);
	char *b = etcd_b64(end, n);
	free(end);
	return b;
}

uint64_t etcd_u64(const cJSON *obj, const char *field)
{
	return record_u64(obj, field);   /* etcd's JSON gateway writes int64s as strings too */
}

void etcd_kv_release(struct etcd_kv *kv)
{
	free(kv->key);
	free(kv->value);
	memset(kv, 0, sizeof(*kv));
}

int etcd_kv_decode(const cJSON *kv, bool deleted, struct etcd_kv *out)
{
	memset(out, 0, sizeof(*out));
	const cJSON *k = cJSON_GetObjectItemCaseSensitive(kv, "key");
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(kv, "value");
	if (!cJSON_IsString(k) || !(out->key = etcd_unb64(k->valuestring, &out->key_len)))
		return -1;
	if (!deleted) {
		/* an empty value is absent from the JSON */
		out->value = cJSON_IsString(v) ? etcd_unb64(v->valuestring, &out->value_len) : xstrdup("");
		if (!out->value) {
			etcd_kv_release(out);
			return -1;
		}
	}
	out->mod_revision = etcd_u64(kv, "mod_revision");
	out->create_revision = etcd_u64(kv, "create_revision");
	return 0;
}

/* --etcd-ca, --etcd-cert, --etcd-key: readable files, or say which is not */
static int check_file(const char *opt, const char *path, char *err, size_t errlen)
{
	if (!path || access(path, R_OK) == 0)
		return 0;
	snprintf(err, errlen, "etcd: cannot read %s '%s': %s", opt, path, strerror(errno));
	return -1;
}

/* The token file: one line USER:PASSWORD, that only its owner may read
 * (like a signing key). Its content is never quoted in an error. */
static int load_token_file(struct etcd *e, const char *path, char *err, size_t errlen)
{
	size_t len = 0;
	char inner[400];
	char *s = read_owner_secret(path, TOKEN_FILE_MAX, "--etcd-token-file", &len, inner, sizeof(inner));
	if (!s) {
		snprintf(err, errlen, "etcd: %s", inner);
		return -1;
	}
	int rc = -1;
	bool nul = strlen(s) != len;
	str_trim(s);
	char *colon = strchr(s, ':');
	if (nul || strpbrk(s, "\r\n") || !colon || colon == s || !colon[1]) {
		snprintf(err, errlen, "etcd: --etcd-token-file '%s' must hold one line USER:PASSWORD (etcd's user "
			 "and its password)", path);
		goto out;
	}
	*colon = '\0';
	e->user = xstrdup(s);
	e->password = xstrdup(colon + 1);
	e->token_file = xstrdup(path);
	rc = 0;
out:
	free_secret(s, len);
	return rc;
}

struct etcd *etcd_open(const struct etcd_opts *o, char *err, size_t errlen)
{
	struct etcd *e = xcalloc(1, sizeof(*e));
	pthread_mutex_init(&e->auth_lock, NULL);
	e->timeout_s = o->timeout_s > 0 ? o->timeout_s : 5;
	char inner[512];
	int n = urllist_parse(o->endpoints ? o->endpoints : "", e->endpoints, MAX_ENDPOINTS, inner, sizeof(inner));
	if (n < 0) {
		snprintf(err, errlen, "etcd: %s", inner);
		goto fail;
	}
	e->n = (size_t)n;
	if (check_file("--etcd-ca", o->ca, err, errlen) < 0 ||
	    check_file("--etcd-cert", o->cert, err, errlen) < 0 ||
	    check_file("--etcd-key", o->key, err, errlen) < 0)
		goto fail;
	e->ca = o->ca ? xstrdup(o->ca) : NULL;
	e->cert = o->cert ? xstrdup(o->cert) : NULL;
	e->key = o->key ? xstrdup(o->key) : NULL;
	if (o->token_file && load_token_file(e, o->token_file, err, errlen) < 0)
		goto fail;
	for (size_t i = 0; e->user && i < e->n; i++) {
		if (strncasecmp(e->endpoints[i], "http://", 7) == 0)
			log_warn("etcd: %s is http://: the password and token of etcd user '%s' cross the "
				 "network in clear", e->endpoints[i], e->user);
	}
	return e;
fail:
	etcd_close(e);
	return NULL;
}

void etcd_close(struct etcd *e)
{
	if (!e)
		return;
	for (size_t i = 0; i < e->n; i++)
		free(e->endpoints[i]);
	free(e->ca);
	free(e->cert);
	free(e->key);
	free(e->user);
	free(e->token_file);
	free_secret_str(e->password);
	free_secret_str(e->auth_token);
	pthread_mutex_destroy(&e->auth_lock);
	free(e);
}

static size_t collect(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	if (b->len + size * n > MAX_ANSWER)
		return 0;   /* a lying peer: refuse, do not grow */
	buf_append(b, ptr, size * n);
	return size * n;
}

const char *etcd_endpoint(struct etcd *e, unsigned attempt)
{
	return e->endpoints[(atomic_load(&e->current) + attempt) % e->n];
}

void etcd_setup_tls(struct etcd *e, CURL *h)
{
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tether-plane/" PACKAGE_VERSION);
	/* HTTP/1.1 over TLS too (as over http://): every request is a
	 * connection of its own, and a TLS alert (a client certificate
	 * refused) then reaches us as such, not as a reset HTTP/2 preface */
	curl_easy_setopt(h, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
	if (e->ca)
		curl_easy_setopt(h, CURLOPT_CAINFO, e->ca);
	if (e->cert) {
		curl_easy_setopt(h, CURLOPT_SSLCERT, e->cert);
		curl_easy_setopt(h, CURLOPT_SSLKEY, e->key);
	}
}

/* A TLS alert about a certificate: etcd refused ours (or wanted one). */
static bool cert_alert(const char *detail)
{
	const char *a = strstr(detail, "alert");
	return a && (strstr(a, "certificate") || strstr(a, "unknown ca"));
}

/* The connection closed under us just after the handshake: how a refused
 * client certificate looks when etcd's alert was not read in time */
static bool closed_early(const char *detail)
{
	return strstr(detail, "getpeername") || strstr(detail, "reset by peer") || strstr(detail, "unexpected eof");
}

void etcd_transfer_error(struct etcd *e, CURLcode rc, const char *detail, char *out, size_t outlen)
{
	const char *d = detail && detail[0] ? detail : curl_easy_strerror(rc);
	if (rc == CURLE_PEER_FAILED_VERIFICATION) {
		if (e->ca)
			snprintf(out, outlen, "TLS: etcd's certificate is not trusted (%s): is it signed by the CA "
				 "in --etcd-ca '%s'?", d, e->ca);
		else
			snprintf(out, outlen, "TLS: etcd's certificate is not trusted (%s): give its CA with "
				 "--etcd-ca", d);
	} else if (rc == CURLE_SSL_CACERT_BADFILE) {
		snprintf(out, outlen, "TLS: cannot use --etcd-ca '%s' (%s)", e->ca ? e->ca : "", d);
	} else if (rc == CURLE_SSL_CERTPROBLEM) {
		snprintf(out, outlen, "TLS: cannot use the client certificate --etcd-cert '%s' with "
			 "--etcd-key '%s' (%s)", e->cert ? e->cert : "", e->key ? e->key : "", d);
	} else if ((rc == CURLE_SSL_CONNECT_ERROR || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR) &&
		   cert_alert(d)) {
		if (e->cert)
			snprintf(out, outlen, "TLS: etcd refused the client certificate --etcd-cert '%s' (%s): "
				 "is it signed by a CA in etcd's --trusted-ca-file?", e->cert, d);
		else
			snprintf(out, outlen, "TLS: etcd wants a client certificate (%s): give --etcd-cert and "
				 "--etcd-key", d);
	} else if (e->cert && closed_early(d)) {
		snprintf(out, outlen, "TLS: etcd closed the connection (%s): did it refuse the client certificate "
			 "--etcd-cert '%s'? (is it signed by a CA in etcd's --trusted-ca-file?)", d, e->cert);
	} else {
		snprintf(out, outlen, "%s", d);
	}
}

void etcd_add_auth(struct etcd *e, struct curl_slist **hdr)
{
	pthread_mutex_lock(&e->auth_lock);
	if (e->auth_token) {
		char *a = xasprintf("Authorization: %s", e->auth_token);
		*hdr = curl_slist_append(*hdr, a);
		free_secret_str(a);
	}
	pthread_mutex_unlock(&e->auth_lock);
}

static void setup(struct etcd *e, CURL *h, const char *url, struct curl_slist *hdr)
{
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
	curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, (long)(e->timeout_s * 1000));
	etcd_setup_tls(e, h);
}

/* The authentication itself goes without a token: etcd checks one that
 * is sent, and refuses the call when it has expired. */
static struct curl_slist *headers(struct etcd *e, const char *path)
{
	struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
	if (strcmp(path, AUTH_PATH) != 0)
		etcd_add_auth(e, &h);
	return h;
}

/* One POST to one endpoint: 1 answered (*status, body in out), 0 could
 * not reach it. */
static int post_one(struct etcd *e, size_t ep, const char *path, const char *body, struct buf *out, long *status,
		    char *cerr, size_t cerrlen)
{
	CURL *h = curl_easy_init();
	if (!h)
		return 0;
	char *url = xasprintf("%s%s", e->endpoints[ep], path);
	char detail[CURL_ERROR_SIZE] = "";
	struct curl_slist *hdr = headers(e, path);
	setup(e, h, url, hdr);
	curl_easy_setopt(h, CURLOPT_ERRORBUFFER, detail);
	curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(e->timeout_s * 1000));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, out);
	alive_curl(h);
	buf_reset(out);
	CURLcode rc = curl_easy_perform(h);
	*status = 0;
	if (rc == CURLE_OK) {
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, status);
	} else {
		char what[512];
		etcd_transfer_error(e, rc, detail, what, sizeof(what));
		snprintf(cerr, cerrlen, "%s: %s", e->endpoints[ep], what);
	}
	curl_easy_cleanup(h);
	curl_slist_free_all(hdr);
	free(url);
	return rc == CURLE_OK;
}

static int authenticate(struct etcd *e, char *err, size_t errlen);

/* etcd's gRPC codes that mean "not now" rather than "no" */
static bool unavailable_code(int code)
{
	return code == 14 /* Unavailable */ || code == 4 /* DeadlineExceeded */ || code == 10 /* Aborted */;
}

/* etcd no longer takes our token (expired, a member restarted, the auth
 * store moved on) or wants one: authenticating again may help */
bool etcd_token_refused(int code, const char *msg)
{
	return code == 16 /* Unauthenticated: "invalid auth token" */ || strstr(msg, "Unauthenticated") ||
	       strstr(msg, "invalid auth token") || strstr(msg, "user name is empty") ||
	       strstr(msg, "revision of auth store is old");
}

/* A refusal's text: the gateway's JSON message, or the first line of a
 * body that is not JSON (printable bytes only, bounded). */
static void refusal_text(const struct buf *out, const cJSON *j, char *msg, size_t msglen, int *code)
{
	const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "message");
	if (!cJSON_IsString(m))
		m = cJSON_GetObjectItemCaseSensitive(j, "error");
	const cJSON *c = cJSON_GetObjectItemCaseSensitive(j, "code");
	*code = cJSON_IsNumber(c) ? c->valueint : 0;
	if (cJSON_IsString(m)) {
		snprintf(msg, msglen, "%.200s", m->valuestring);
		return;
	}
	size_t n = 0;
	for (size_t i = 0; i < out->len && out->data[i] != '\n' && n + 1 < msglen && n < 200; i++)
		msg[n++] = out->data[i] >= 0x20 && out->data[i] < 0x7f ? out->data[i] : '?';
	msg[n] = '\0';
	if (!n)
		snprintf(msg, msglen, "no message");
}

/* err for a refusal, in an operator's words where etcd's are cryptic */
static void refusal(struct etcd *e, const char *path, long status, int code, const char *msg, char *err,
		    size_t errlen)
{
	if (strstr(msg, "CommonName of client sending a request against gateway"))
		snprintf(err, errlen, "etcd refuses the client certificate --etcd-cert '%s' on its JSON "
			 "gateway: it has a Common Name, which etcd will not take there while its auth is on; "
			 "issue the certificate without a CN (e.g. -subj /O=tether): the user comes from "
			 "--etcd-token-file (etcd: %s)", e->cert ? e->cert : "", msg);
	else if (strcmp(path, AUTH_PATH) == 0)
		snprintf(err, errlen, "etcd: authentication as etcd user '%s' failed (user and password from "
			 "--etcd-token-file '%s'): %s", e->user, e->token_file, msg);
	else if (strstr(msg, "user name is empty"))
		snprintf(err, errlen, "etcd's authentication is on and no user was given: give --etcd-token-file "
			 "with USER:PASSWORD (etcd: %s)", msg);
	else if (code == 7 /* PermissionDenied */)
		snprintf(err, errlen, "etcd user '%s' is not permitted to do this (%s on %s): its role needs "
			 "readwrite on the range of --etcd-prefix", e->user ? e->user : "(none)", msg, path);
	else
		snprintf(err, errlen, "etcd %s: HTTP %ld: %s", path, status, msg);
}

static int call_text(struct etcd *e, const char *path, const char *body, cJSON **resp, bool retry_auth, char *err,
		     size_t errlen)
{
	struct buf out = BUF_INIT;
	char cerr[700] = "";
	long status = 0;
	size_t start = atomic_load(&e->current), ep = start;
	bool answered = false, auth = strcmp(path, AUTH_PATH) == 0;
	for (size_t i = 0; i < e->n && !answered; i++) {
		ep = (start + i) % e->n;
		answered = post_one(e, ep, path, body, &out, &status, cerr, sizeof(cerr));
	}
	if (!answered) {
		snprintf(err, errlen, "etcd unavailable (%s)", cerr);
		buf_release(&out);
		return ETCD_UNAVAILABLE;
	}
	atomic_store(&e->current, ep);
	cJSON *j = out.len ? cJSON_ParseWithLength(out.data, out.len) : NULL;
	char msg[256] = "";
	int code = 0;
	if (status != 200)
		refusal_text(&out, j, msg, sizeof(msg), &code);
	if (auth && out.len)
		sodium_memzero(out.data, out.len);   /* it held the token */
	if (status != 200) {
		cJSON_Delete(j);
		buf_release(&out);
		if (retry_auth && e->user && etcd_token_refused(code, msg)) {
			/* once more with a new token */
			log_info("etcd: the auth token was refused (%s); authenticating again", msg);
			int rc = authenticate(e, err, errlen);
			if (rc < 0)
				return rc;
			return call_text(e, path, body, resp, false, err, errlen);
		}
		refusal(e, path, status, code, msg, err, errlen);
		return unavailable_code(code) || status == 503 ? ETCD_UNAVAILABLE : -1;
	}
	buf_release(&out);
	if (!j) {
		snprintf(err, errlen, "etcd %s: the answer is not JSON", path);
		return -1;
	}
	*resp = j;
	return 0;
}

static int authenticate(struct etcd *e, char *err, size_t errlen)
{
	cJSON *b = cJSON_CreateObject();
	cJSON_AddStringToObject(b, "name", e->user);
	cJSON_AddStringToObject(b, "password", e->password);
	char *body = cJSON_PrintUnformatted(b);
	cJSON *pw = cJSON_GetObjectItemCaseSensitive(b, "password");
	sodium_memzero(pw->valuestring, strlen(pw->valuestring));
	cJSON_Delete(b);
	cJSON *resp = NULL;
	int rc = call_text(e, AUTH_PATH, body, &resp, false, err, errlen);
	free_secret_str(body);
	if (rc < 0 && strstr(err, "authentication is not enabled")) {
		/* as etcd's own client does: on without a token (and with
		 * one again should etcd ask for it) */
		pthread_mutex_lock(&e->auth_lock);
		if (!e->auth_off)
			log_warn("etcd: its authentication is not enabled: going on without a token "
				 "(--etcd-token-file is not used)");
		e->auth_off = true;
		pthread_mutex_unlock(&e->auth_lock);
		return 0;
	}
	if (rc < 0)
		return rc;
	cJSON *t = cJSON_GetObjectItemCaseSensitive(resp, "token");
	if (!cJSON_IsString(t)) {
		snprintf(err, errlen, "etcd: authentication answered no token");
		cJSON_Delete(resp);
		return -1;
	}
	pthread_mutex_lock(&e->auth_lock);
	free_secret_str(e->auth_token);
	e->auth_token = xstrdup(t->valuestring);
	e->auth_off = false;
	bool first = !e->authenticated;
	e->authenticated = true;
	pthread_mutex_unlock(&e->auth_lock);
	if (first)
		log_info("etcd: authenticated as etcd user '%s'", e->user);
	sodium_memzero(t->valuestring, strlen(t->valuestring));
	cJSON_Delete(resp);
	return 0;
}

int etcd_reauthenticate(struct etcd *e, char *err, size_t errlen)
{
	return e->user ? authenticate(e, err, errlen) : 0;
}

int etcd_call(struct etcd *e, const char *path, cJSON *body, cJSON **resp, char *err, size_t errlen)
{
	*resp = NULL;
	if (e->user) {
		pthread_mutex_lock(&e->auth_lock);
		bool need = !e->auth_token && !e->auth_off;
		pthread_mutex_unlock(&e->auth_lock);
		if (need) {
			int rc = authenticate(e, err, errlen);
			if (rc < 0) {
				cJSON_Delete(body);
				return rc;
			}
		}
	}
	char *text = cJSON_PrintUnformatted(body);
	cJSON_Delete(body);
	int rc = call_text(e, path, text, resp, true, err, errlen);
	free(text);
	return rc;
}

int etcd_range_prefix(struct etcd *e, const char *prefix, bool keys_only, uint64_t rev, etcd_kv_cb cb, void *ctx,
		      uint64_t *revision, char *err, size_t errlen)
{
	char *from = etcd_b64(prefix, strlen(prefix)), *end = etcd_prefix_end_b64(prefix);
	uint64_t at = rev;
	int rc = 0;
	for (;;) {
		cJSON *b = cJSON_CreateObject(), *resp = NULL;
		cJSON_AddStringToObject(b, "key", from);
		cJSON_AddStringToObject(b, "range_end", end);
		cJSON_AddNumberToObject(b, "limit", RANGE_PAGE);
		if (keys_only)
			cJSON_AddTrueToObject(b, "keys_only");
		if (at) {
			char r[24];
			snprintf(r, sizeof(r), "%llu", (unsigned long long)at);
			cJSON_AddStringToObject(b, "revision", r);   /* every page at one revision */
		}
		rc = etcd_call(e, "/v3/kv/range", b, &resp, err, errlen);
		if (rc < 0)
			break;
		if (!at)
			at = etcd_u64(cJSON_GetObjectItemCaseSensitive(resp, "header"), "revision");
		const cJSON *kvs = cJSON_GetObjectItemCaseSensitive(resp, "kvs"), *kv;
		struct etcd_kv last = { 0 };
		cJSON_ArrayForEach(kv, kvs) {
			struct etcd_kv d;
			if (etcd_kv_decode(kv, false, &d) < 0) {
				snprintf(err, errlen, "etcd: a malformed key in a range answer");
				rc = -1;
				break;
			}
			if (keys_only) {
				free(d.value);
				d.value = NULL;
			}
			if (cb(ctx, &d) < 0) {
				snprintf(err, errlen, "etcd: a key could not be taken (%.100s)", d.key);
				etcd_kv_release(&d);
				rc = -1;
				break;
			}
			etcd_kv_release(&last);
			last = d;
		}
		bool more = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(resp, "more"));
		cJSON_Delete(resp);
		if (rc < 0 || !more || !last.key) {
			etcd_kv_release(&last);
			break;
		}
		/* the next page starts just past the last key */
		char *next = xmalloc(last.key_len + 1);
		memcpy(next, last.key, last.key_len);
		next[last.key_len] = '\0';
		free(from);
		from = etcd_b64(next, last.key_len + 1);   /* key + "\0" */
		free(next);
		etcd_kv_release(&last);
	}
	free(from);
	free(end);
	if (revision)
		*revision = at;
	return rc;
}
