/* persist/etcd/client.h: etcd v3 through its JSON gateway over libcurl (the calls
 * APISIX makes): one request per call against the first endpoint that
 * answers, keys and values as bytes (base64 on the wire, hidden here), and
 * a watch that runs in its own thread. Thread-safe. */
#ifndef TETHER_ETCD_CLIENT_H
#define TETHER_ETCD_CLIENT_H

#include <cjson/cJSON.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct etcd_opts {
	const char *endpoints;      /* "http://h:p,https://h2:p" */
	const char *ca, *cert, *key;
	const char *token_file;     /* "USER:PASSWORD" for etcd's own auth */
	double timeout_s;           /* per request */
};

struct etcd;

/* Errors: -1 a bad answer or a refusal (err says which), -2 etcd could not
 * be reached or has no quorum (no endpoint answered in time). */
#define ETCD_UNAVAILABLE (-2)

struct etcd *etcd_open(const struct etcd_opts *o, char *err, size_t errlen);
void etcd_close(struct etcd *e);

/* POSTs body (taken) to path ("/v3/kv/range"); *resp gets the parsed
 * answer (caller frees). 0, -1 or ETCD_UNAVAILABLE with err. */
int etcd_call(struct etcd *e, const char *path, cJSON *body, cJSON **resp, char *err, size_t errlen);

/* Base64 of n bytes (new allocated), and back (new allocated, NUL
 * terminated; *n its length; NULL when malformed). */
char *etcd_b64(const void *p, size_t n);
char *etcd_unb64(const char *s, size_t *n);
/* The end of the range of every key that starts with prefix (new
 * allocated, base64). */
char *etcd_prefix_end_b64(const char *prefix);
/* A decimal string field of etcd's JSON ("revision": "12"); 0 when absent. */
uint64_t etcd_u64(const cJSON *obj, const char *field);

/* For the watch (persist/etcd/watch.c): the endpoint to try on attempt n (the
 * one that answered last first), TLS options on a handle, and the auth
 * header appended to a list. */
#include <curl/curl.h>
const char *etcd_endpoint(struct etcd *e, unsigned attempt);
void etcd_setup_tls(struct etcd *e, CURL *h);
void etcd_add_auth(struct etcd *e, struct curl_slist **hdr);
/* Whether a refusal (a gRPC code, etcd's message or a watch's cancel
 * reason) means etcd no longer takes our token (expired, a member
 * restarted, the auth store moved on): a new one may help. */
bool etcd_token_refused(int code, const char *msg);
/* What a failed transfer (rc, and curl's CURLOPT_ERRORBUFFER detail)
 * means, in an operator's words: the TLS refusals name the option to
 * check (--etcd-ca, --etcd-cert, --etcd-key). */
void etcd_transfer_error(struct etcd *e, CURLcode rc, const char *detail, char *out, size_t outlen);
/* etcd refused the token a watch was opened with: a new one. 0 (at once
 * without --etcd-token-file), -1 or ETCD_UNAVAILABLE with err. */
int etcd_reauthenticate(struct etcd *e, char *err, size_t errlen);

/* One key-value as the range and watch answers carry it (decoded). */
struct etcd_kv {
	char *key, *value;          /* value NULL: a deletion (watch) */
	size_t key_len, value_len;
	uint64_t mod_revision, create_revision;
};
void etcd_kv_release(struct etcd_kv *kv);
/* Decodes one "kv" object; 0, or -1 when malformed. */
int etcd_kv_decode(const cJSON *kv, bool deleted, struct etcd_kv *out);

/* Every key under prefix (values too unless keys_only), at revision rev
 * (0: the newest), page by page; cb per key. *revision gets the revision
 * read. 0, -1 or ETCD_UNAVAILABLE with err. */
typedef int (*etcd_kv_cb)(void *ctx, const struct etcd_kv *kv);
int etcd_range_prefix(struct etcd *e, const char *prefix, bool keys_only, uint64_t rev, etcd_kv_cb cb, void *ctx,
		      uint64_t *revision, char *err, size_t errlen);

/* The watch: events under prefix from start_rev on, delivered revision by
 * revision (all events of one revision in one call, in order) from the
 * watch's own thread. It reopens itself from the last revision delivered
 * plus one when it breaks, times out or goes silent while etcd moved on
 * (checked every check_s: the same check confirms it is current).
 * compacted is called when start is gone (the caller reloads and calls
 * etcd_watch_restart). */
struct etcd_watch_cbs {
	void *ctx;
	/* events of one revision; 0 delivered, -1 to stop (an error) */
	int (*revision)(void *ctx, uint64_t rev, const struct etcd_kv *kvs, size_t n);
	/* the revision asked for was compacted (first kept: compact_rev) */
	void (*compacted)(void *ctx, uint64_t compact_rev);
	/* connected (true) or not to etcd now */
	void (*health)(void *ctx, bool up, const char *why);
};
struct etcd_watch;
struct etcd_watch *etcd_watch_start(struct etcd *e, const char *prefix, uint64_t start_rev, double check_s,
				    const struct etcd_watch_cbs *cbs, char *err, size_t errlen);
/* After a compaction reload: go on from rev + 1. */
void etcd_watch_restart(struct etcd_watch *w, uint64_t rev);
/* Revisions delivered so far (the last one); watches (re)opened. */
uint64_t etcd_watch_revision(struct etcd_watch *w);
uint64_t etcd_watch_opens(struct etcd_watch *w);
/* The last time (monotonic ms) the watch confirmed it had delivered every
 * revision etcd held under the prefix (the liveness check read the newest
 * one and it was delivered), and the last reason it reopened ("" none).
 * A replica that cannot confirm for long is stale (freshness.h). */
int64_t etcd_watch_confirmed(struct etcd_watch *w, char *why, size_t cap);
void etcd_watch_stop(struct etcd_watch *w);

#endif
