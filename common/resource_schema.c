/* resource_schema.c: the table of resource types and fields (see
 * resource_schema.h), the lookups over it and the unknown-field check
 * (with the nearest known name). Edit the table here, then run
 * `tetherctl explain --man > docs/man/tether-resources.5` (t0017 fails
 * while the page differs). */
#include "resource_schema.h"
#include "buf.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

/* ---- the table --------------------------------------------------------- */

/* snippet, snippet.nginx, snippet.haproxy: where each consumer pastes the
 * lines, and what a haproxy snippet may hold there. */
#define SNIPPET_LIMITS "at most 16384 bytes, no NUL; "
#define SNIPPET_FIELDS(nginx_where, haproxy_where, haproxy_lines) \
	{ "snippet", "object", 0, "writers with the admin role only", \
	  "Raw directives for one consumer, pasted verbatim after tether's own lines" }, \
	{ "snippet.nginx", "string", 0, \
	  SNIPPET_LIMITS "balanced braces and quotes; no directive of the forbidden list (include, " \
	  "load_module, *_by_lua*, lua_*, perl*, js_*, root, alias, proxy_pass, blocks such as server or " \
	  "location, directives naming files; the full list: docs/protocol.md)", \
	  "nginx directives for " nginx_where "; nginx -t on the canary decides the rest" }, \
	{ "snippet.haproxy", "string", 0, \
	  SNIPPET_LIMITS haproxy_lines "; no section keyword, lua, file argument, server, bind, use_backend " \
	  "or other keyword of the forbidden list (docs/protocol.md)", \
	  "haproxy lines for " haproxy_where "; haproxy -c on the canary decides the rest" }
#define HAPROXY_LINES "one directive a line, no continuation"

/* What resource.c's hostname_valid() and route_path_valid() take. */
#define DNS_NAME "; a DNS name: labels of letters, digits and -, at most 63 bytes each, not starting or " \
	"ending with -, joined by dots, at most 253 bytes"
#define URL_PATH_CHARS "letters, digits and - . _ ~ / % : @ + , = ! * only"

static const struct rs_field secret_fields[] = {
	{ "cert", "string", RS_REQUIRED,
	  "PEM text of at most 65536 bytes: 1 to 16 certificates, the server's first, then its chain",
	  "The certificate the listener presents, with its chain" },
	{ "key", "string", RS_REQUIRED,
	  "PEM text of at most 65536 bytes: one unencrypted private key (PKCS#8, RSA or EC), the key of "
	  "cert's first certificate",
	  "The certificate's private key; never shown in an error or a log" },
	{ "sealed", "object", RS_SEALED, "made by tetherctl put --seal; in place of cert and key",
	  "A sealed secret's envelope: the body encrypted to a data key only nodes and the recovery key open" },
	{ "sealed.v", "integer", RS_SEALED | RS_REQUIRED, "1", "The envelope's format" },
	{ "sealed.id", "string", RS_SEALED | RS_REQUIRED, "32 lowercase hex digits",
	  "The envelope's id, new with each sealing" },
	{ "sealed.rk", "string", RS_SEALED | RS_REQUIRED, "16 lowercase hex digits",
	  "The id of the recovery key the data key is wrapped to" },
	{ "sealed.recovery", "string", RS_SEALED | RS_REQUIRED, "base64 of 80 bytes",
	  "The data key wrapped to the recovery key" },
	{ "sealed.kc", "string", RS_SEALED | RS_REQUIRED, "base64 of 32 bytes",
	  "A check of the data key: a wrap that opens to another key is caught" },
	{ "sealed.nonce", "string", RS_SEALED | RS_REQUIRED, "base64 of 24 bytes", "The encryption's nonce" },
	{ "sealed.ct", "string", RS_SEALED | RS_REQUIRED, "base64; the plaintext at most 262144 bytes",
	  "The plaintext body ({\"cert\":...,\"key\":...}) encrypted with XChaCha20-Poly1305" },
	{ "wraps", "object of strings", RS_SEALED | RS_MAP,
	  "node key id (16 lowercase hex digits) -> base64 of 80 bytes, at most 100000; {} for none",
	  "The data key wrapped to each node key the secret's subscription reaches" },
	{ "superseded", "array of strings", RS_SEALED,
	  "envelope ids; the plane's own (a writer's is ignored), at most 1000",
	  "The ids of the envelopes this secret had before" },
	{ NULL, NULL, 0, NULL, NULL },
};

static const struct rs_field cluster_fields[] = {
	{ "endpoints", "array of objects", RS_REQUIRED,
	  "at most 10000; may be empty: requests then fail (nginx 502, haproxy 503)",
	  "The upstream servers requests go to" },
	{ "endpoints[].address", "string", RS_REQUIRED, "an IPv4 or IPv6 address, or a DNS name" DNS_NAME,
	  "The endpoint's address" },
	{ "endpoints[].port", "integer", RS_REQUIRED, "1..65535", "The endpoint's port" },
	{ "endpoints[].weight", "integer", 0, "1..256 (default 1)",
	  "The endpoint's share of requests against the others'" },
	{ "lb", "string", 0, "round_robin, least_conn or random (default round_robin)",
	  "How a request picks its endpoint" },
	{ "health", "object", 0, "",
	  "A passive health check: an endpoint that fails max_fails times within fail_timeout is taken out "
	  "for fail_timeout (nginx max_fails and fail_timeout; haproxy: the nearest mapping, see tetherd(8))" },
	{ "health.max_fails", "integer", 0, "1..1000", "Failed requests that take an endpoint out" },
	{ "health.fail_timeout", "integer", 0, "seconds, 1..86400",
	  "The window the failures are counted in, and how long the endpoint stays out" },
	{ "keepalive", "integer", 0, "0..10000",
	  "Idle connections to the endpoints kept open per worker (nginx keepalive; haproxy http-reuse)" },
	SNIPPET_FIELDS("the cluster's upstream block", "the cluster's backend", HAPROXY_LINES),
	{ NULL, NULL, 0, NULL, NULL },
};

static const struct rs_field listener_fields[] = {
	{ "address", "string", 0, "an IPv4 or IPv6 address (default 0.0.0.0: every IPv4 address; :: is every IPv6 one)",
	  "The address to accept connections on" },
	{ "port", "integer", RS_REQUIRED, "1..65535", "The port to accept connections on" },
	{ "tls", "object", 0, "null or absent: plain HTTP", "Serve TLS with a secret's certificate and key" },
	{ "tls.secret", "string", RS_REQUIRED, "a resource name; secret/NAME must exist",
	  "The secret holding the certificate and key" },
	SNIPPET_FIELDS("each server block of the listener", "the listener's frontend", HAPROXY_LINES),
	{ NULL, NULL, 0, NULL, NULL },
};

#define HEADER_FIELDS(dir, what, host) \
	{ "headers." dir, "object", 0, "", "The headers of the " what }, \
	{ "headers." dir ".set", "object of strings", RS_MAP, \
	  "NAME -> VALUE, at most 64; NAME: RFC 7230 token characters, at most 128; VALUE: printable " \
	  "ASCII (0x20..0x7e) without \" \\ $ ; { } ', 1 to 1024; not Content-Length or Transfer-Encoding" \
	  host, \
	  "Headers set on the " what ", replacing any of the same name" }, \
	{ "headers." dir ".remove", "array of strings", 0, \
	  "at most 64 names, each of RFC 7230 token characters, at most 128; a name may not be both set and " \
	  "removed; not Host, Content-Length or Transfer-Encoding", \
	  "Headers removed from the " what }

static const struct rs_field route_fields[] = {
	{ "listener", "string", RS_REQUIRED, "a resource name; listener/NAME must exist",
	  "The listener whose requests the route takes" },
	{ "host", "string", 0, "*, a DNS name, or *. and a DNS name (default *)" DNS_NAME,
	  "The host the requests are for (their Host header, compared without case)" },
	{ "path", "string", 0, "starts with /, then " URL_PATH_CHARS "; at most 1024 bytes (default /)",
	  "A path prefix; of a listener's routes for a host, the longest matching prefix wins" },
	{ "cluster", "string", RS_REQUIRED, "a resource name; cluster/NAME must exist",
	  "The cluster the requests go to" },
	{ "timeout", "object", 0, "", "Timeouts of the requests to the cluster" },
	{ "timeout.connect", "number", 0, "seconds, 0.001..86400",
	  "To connect to an endpoint" },
	{ "timeout.read", "number", 0, "seconds, 0.001..86400",
	  "Between two reads of the endpoint's answer" },
	{ "timeout.send", "number", 0, "seconds, 0.001..86400",
	  "Between two writes of the request to the endpoint" },
	{ "strip_prefix", "boolean", 0, "not with path / or without a path; not with rewrite",
	  "Remove the route's path from the request's before it goes upstream (/api/x?q -> /x?q, /api -> /)" },
	{ "rewrite", "string", 0,
	  "starts with /, then " URL_PATH_CHARS " but %; at most 1024 bytes; not with strip_prefix",
	  "Replace the route's path prefix with this one (path /old, rewrite /new: /old/x -> /new/x)" },
	{ "headers", "object", 0, "", "Headers set or removed, on the request and the response" },
	HEADER_FIELDS("request", "request sent to the cluster", "; Host may be set"),
	HEADER_FIELDS("response", "response sent to the client", ""),
	{ "websocket", "boolean", 0, "default false",
	  "Pass Upgrade and Connection through and keep the tunnel open (haproxy: timeout tunnel, 3600 s or "
	  "timeout.read)" },
	{ "retries", "integer", 0, "0..10",
	  "Further endpoints tried after an error or a connect timeout" },
	{ "max_body", "integer", 0, "bytes, 0..1099511627776 (0: unlimited)",
	  "A larger request body is answered 413" },
	SNIPPET_FIELDS("the route's location block",
		       "the listener's frontend, each with the route's condition appended",
		       "each line an http-request or http-response rule without if or unless"),
	{ NULL, NULL, 0, NULL, NULL },
};

static const struct rs_field file_fields[] = {
	{ "path", "string", RS_REQUIRED,
	  "relative; no '..', '.' or empty component, none starting .tether, no control character or backslash; "
	  "at most 4096 bytes, 255 a component",
	  "Where the file is written, under tetherd's --output-dir" },
	{ "content", "string", RS_REQUIRED, "none of its own: the whole body is at most tether-plane --max-body (default 1048576 bytes)",
	  "The file's content" },
	{ "mode", "string", 0, "3 or 4 octal digits, 000..0777 (default 0644)", "The file's permissions" },
	{ NULL, NULL, 0, NULL, NULL },
};

static const struct rs_field guard_fields[] = {
	{ "match", "string", 0,
	  "a name prefix that a cluster/, file/ or secret/ name can start with, at most 220 bytes "
	  "(default: every resource)",
	  "The resources the guard covers: those whose name starts with it" },
	{ "min_endpoints", "integer", 0, "0..1000000000",
	  "A cluster may not be left with fewer endpoints (deleting one leaves 0)" },
	{ "max_shrink", "number", 0, "0..1",
	  "A cluster may not lose more than this share of its endpoints in one version" },
	{ "max_bytes", "integer", 0, "1..1000000000000000",
	  "A file's content or a secret's body may not be larger (bytes)" },
	{ "max_growth", "number", 0, "1..1000000000",
	  "A file's content may not grow more than this many times in one version" },
	{ NULL, NULL, 0, NULL, NULL },
};

/* A throwaway pair for site.example, so that the example is one the plane
 * takes: never serve it. */
#define EXAMPLE_CERT \
	"-----BEGIN CERTIFICATE-----\\nMIIBnzCCAUSgAwIBAgIUOZUlpP1fgTYo7azDwOkPYjmq4ZMwCgYIKoZIzj0EAwIw\\n" \
	"FzEVMBMGA1UEAwwMc2l0ZS5leGFtcGxlMCAXDTI2MTIwNjA0MTgwMFoYDzIxMjYx\\n" \
	"MTEyMDQxODAwWjAXMRUwEwYDVQQDDAxzaXRlLmV4YW1wbGUwWTATBgcqhkjOPQIB\\n" \
	"BggqhkjOPQMBBwNCAATQ2SnOfToC3cC4t0BzzIhZBK7lHTUAacB/Xo4DPmvNbqFW\\n" \
	"67pynBBfT5oGLDQAmQZG8Fh+BEfRSLkFTZP4YAbQo2wwajAdBgNVHQ4EFgQUvjkk\\n" \
	"WpAoIMt9IDqLUmsfBWmwUWswHwYDVR0jBBgwFoAUvjkkWpAoIMt9IDqLUmsfBWmw\\n" \
	"UWswDwYDVR0TAQH/BAUwAwEB/zAXBgNVHREEEDAOggxzaXRlLmV4YW1wbGUwCgYI\\n" \
	"KoZIzj0EAwIDSQAwRgIhALDMvv0CwVkr2F+RWte1q8KxZULnu/qk0ndfai6/26Pw\\n" \
	"AiEA9LZCl2Xwj06y+/BwocrfD+TMliX+/nx59Z7VZKUnt5Y=\\n-----END CERTIFICATE-----\\n"
#define EXAMPLE_KEY \
	"-----BEGIN PRIVATE KEY-----\\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQge+1UO8EGXSnVpp9f\\n" \
	"93NL8hI0PfZaAn/zFCClDZkVU5ehRANCAATQ2SnOfToC3cC4t0BzzIhZBK7lHTUA\\n" \
	"acB/Xo4DPmvNbqFW67pynBBfT5oGLDQAmQZG8Fh+BEfRSLkFTZP4YAbQ\\n-----END PRIVATE KEY-----\\n"

/* In make-before-break order (resource.h), so the examples, written in
 * this order, find what they name. */
static const struct rs_type types[RES_TYPE_COUNT] = {
	{ RES_SECRET,
	  "A TLS certificate and its private key, which a listener names in tls.secret. On a write the plane "
	  "parses both (tetherd checks them again before a render) and refuses a pair whose key is not the "
	  "certificate's. A secret may instead be sealed (tetherctl put --seal): its body is then an "
	  "envelope (sealed, wraps, superseded) that only nodes and the recovery key open. The example's "
	  "pair is a throwaway for site.example: make your own, and its body from PEM files with jq -n "
	  "--rawfile c site.crt --rawfile k site.key '{cert:$c,key:$k}'.",
	  "site",
	  "{\n  \"cert\": \"" EXAMPLE_CERT "\",\n  \"key\": \"" EXAMPLE_KEY "\"\n}\n",
	  secret_fields },
	{ RES_CLUSTER,
	  "A set of upstream endpoints that routes send requests to, and how a request picks one. nginx "
	  "renders it as an upstream, haproxy as a backend.",
	  "web",
	  "{\n  \"endpoints\": [\n    {\"address\": \"10.0.0.5\", \"port\": 8080, \"weight\": 2},\n"
	  "    {\"address\": \"10.0.0.6\", \"port\": 8080}\n  ],\n  \"lb\": \"least_conn\"\n}\n",
	  cluster_fields },
	{ RES_LISTENER,
	  "An address and port the proxy accepts connections on, serving TLS when tls names a secret. Routes "
	  "attach to a listener. nginx renders a server block per listener and host, haproxy a frontend.",
	  "public",
	  "{\n  \"address\": \"0.0.0.0\",\n  \"port\": 443,\n  \"tls\": {\"secret\": \"site\"}\n}\n",
	  listener_fields },
	{ RES_ROUTE,
	  "Sends the requests that arrive on a listener for a host and a path prefix to a cluster. Give each "
	  "host and path of a listener one route: the plane does not refuse a second, and nginx -t refuses "
	  "the duplicate location at the canary.",
	  "api",
	  "{\n  \"listener\": \"public\",\n  \"host\": \"www.example.com\",\n  \"path\": \"/api\",\n"
	  "  \"cluster\": \"web\"\n}\n",
	  route_fields },
	{ RES_FILE,
	  "A file that tetherd's files consumer writes under its --output-dir, with its mode: a page, a map, "
	  "a configuration fragment. It changes with the version like every other resource.",
	  "maintenance",
	  "{\n  \"path\": \"html/maintenance.html\",\n  \"content\": \"<h1>Back soon</h1>\\n\",\n"
	  "  \"mode\": \"0644\"\n}\n",
	  file_fields },
	{ RES_GUARD,
	  "Limits what one version may do to the resources whose name starts with match: a cluster losing "
	  "endpoints, a file or secret growing past a size. A write that crosses a guard is refused (422) "
	  "unless it carries an override (tetherctl --override REASON), and nodes check again. Every field "
	  "is optional; a guard renders nothing.",
	  "clusters",
	  "{\n  \"match\": \"cluster/\",\n  \"min_endpoints\": 1,\n  \"max_shrink\": 0.5\n}\n",
	  guard_fields },
};

/* ---- lookups ------------------------------------------------------------ */

const struct rs_type *resource_schema(enum res_type t)
{
	return t < RES_TYPE_COUNT ? &types[t] : NULL;
}

const struct rs_type *resource_schema_by_name(const char *name)
{
	for (int t = 0; t < RES_TYPE_COUNT; t++)
		if (strcmp(resource_type_name((enum res_type)t), name) == 0)
			return &types[t];
	return NULL;
}

/* Compares a table path with a user's, "[]" optional in the user's. */
static bool path_equal(const char *table, const char *user)
{
	while (*table && *user) {
		if (table[0] == '[' && table[1] == ']') {
			table += 2;
			if (user[0] == '[' && user[1] == ']')
				user += 2;
			continue;
		}
		if (*table++ != *user++)
			return false;
	}
	return !*table && !*user;
}

const struct rs_field *resource_schema_field(enum res_type t, const char *path)
{
	if (t >= RES_TYPE_COUNT)
		return NULL;
	for (const struct rs_field *f = types[t].fields; f->path; f++)
		if (path_equal(f->path, path))
			return f;
	return NULL;
}

bool resource_schema_under(const struct rs_field *f, const char *prefix)
{
	size_t n = strlen(prefix);
	return strncmp(f->path, prefix, n) == 0 && (f->path[n] == '\0' || f->path[n] == '.' || f->path[n] == '[');
}

size_t resource_schema_children(enum res_type t, const char *parent, unsigned skip, const char **names,
				size_t cap)
{
	size_t n = 0, lp = strlen(parent);
	if (t >= RES_TYPE_COUNT)
		return 0;
	for (const struct rs_field *f = types[t].fields; f->path && n < cap; f++) {
		const char *rest = f->path;
		if (f->flags & skip)
			continue;
		if (lp) {
			if (strncmp(f->path, parent, lp) != 0 || f->path[lp] != '.')
				continue;
			rest = f->path + lp + 1;
		}
		if (strchr(rest, '.') || strchr(rest, '['))
			continue;
		names[n++] = rest;
	}
	return n;
}

/* The optimal string alignment distance of a and b (an adjacent swap is one
 * edit): small names only, longer ones are "far". */
#define SUGGEST_MAX 32
static size_t edit_distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	if (la > SUGGEST_MAX || lb > SUGGEST_MAX)
		return SIZE_MAX;
	size_t d[SUGGEST_MAX + 1][SUGGEST_MAX + 1];
	for (size_t i = 0; i <= la; i++)
		d[i][0] = i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = j;
	for (size_t i = 1; i <= la; i++) {
		for (size_t j = 1; j <= lb; j++) {
			size_t cost = a[i - 1] != b[j - 1];
			size_t m = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < m)
				m = d[i][j - 1] + 1;
			if (d[i - 1][j - 1] + cost < m)
				m = d[i - 1][j - 1] + cost;
			if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < m)
				m = d[i - 2][j - 2] + 1;
			d[i][j] = m;
		}
	}
	return d[la][lb];
}

const char *resource_schema_nearest(const char *key, const char *const *names, size_t n)
{
	const char *best = NULL;
	size_t best_d = SIZE_MAX;
	for (size_t i = 0; i < n; i++) {
		if (strcasecmp(key, names[i]) == 0)
			return names[i];
		size_t d = edit_distance(key, names[i]);
		size_t la = strlen(key), lf = strlen(names[i]);
		size_t limit = ((la > lf ? la : lf) + 2) / 3;
		if (d <= limit && d < best_d) {
			best = names[i];
			best_d = d;
		}
	}
	return best;
}

int resource_schema_check(enum res_type t, const char *parent, unsigned skip, const cJSON *obj, char *err,
			  size_t errlen)
{
	const char *names[RS_CHILDREN_MAX];
	size_t n = resource_schema_children(t, parent, skip | RS_PENDING, names, RS_CHILDREN_MAX);
	for (const cJSON *c = obj->child; c; c = c->next) {
		bool known = false;
		for (size_t i = 0; i < n && !known; i++)
			known = strcmp(c->string, names[i]) == 0;
		if (known)
			continue;
		char show[STR_SHOW_BUF];
		const char *near = resource_schema_nearest(c->string, names, n);
		if (near) {
			snprintf(err, errlen, "unknown field '%s' (did you mean '%s'?)", str_show(c->string, show), near);
		} else {
			struct buf list = BUF_INIT;
			for (size_t i = 0; i < n; i++)
				buf_printf(&list, "%s%s", i ? ", " : "", names[i]);
			snprintf(err, errlen, "unknown field '%s' (known: %s)", str_show(c->string, show),
				 n ? list.data : "none");
			buf_release(&list);
		}
		return -1;
	}
	return 0;
}
