/* fuzz_render.c: libFuzzer target for the nginx and haproxy renderers
 * (agent/consumer/render*.c) with the real programs as the oracle, the way OSS-Fuzz
 * runs nginx's conf_fuzzer and haproxy's fuzz_cfg_parser. The input is a
 * push (JSON); it is decoded (push_decode), built into a candidate against
 * an empty state (not strict), rendered by both renderers with the default
 * marker, and each accepted render is written out the way consumer/gen.c
 * writes a generation (the main file, the secrets under DIR/secrets/, for
 * nginx the check.nginx wrapper) into a private temp directory and checked
 * with `nginx -t -q -p DIR -e stderr -c DIR/check.nginx` and
 * `haproxy -c -q -f DIR/tether.cfg`.
 *
 * Properties:
 *  - the agent refuses the push (decode, candidate or render error, always
 *    with a message) OR both checkers accept the configuration (and nginx
 *    warns of no server name it ignores);
 *  - a render with the candidate equals the render of the committed state,
 *    and rendering again gives the same bytes;
 *  - nothing escapes the grammar: every line of the output has one of the
 *    shapes the renderers print; no byte outside printable ASCII; outside
 *    comments no ';' but at a line's end, no '{' or '}' but as block
 *    delimiters, no quote but the marker's and proxy_set_header's; the
 *    number of proxy_pass lines is the number of routes, of server_name
 *    lines the number of (listener, host) pairs (hosts compare without
 *    case, as nginx does) plus a default server per listener without a "*"
 *    route; haproxy has a use_backend per route and a frontend per listener;
 *  - secret files are 0600 and marked secret; the main file is not.
 *
 * The checkers only see configurations whose result depends on nothing but
 * the text and this host: every endpoint an IP address or "localhost" (they
 * resolve host names when they load), every TLS secret one of the key pairs
 * below (they load the key material), every listener on a loopback or
 * wildcard address and a port we may bind (`nginx -t` binds them). Others
 * get the render-only checks. A render identical to one already checked in
 * this process is not checked again. Without nginx or haproxy (or with
 * FUZZ_NGINX= / FUZZ_HAPROXY= empty) the render-only checks still run.
 * FUZZ_RENDER_TOLERATE, an extended regular expression, names findings (a
 * checker's message, a count that is off) to count instead of failing on,
 * to fuzz past a known, reported bug; FUZZ_RENDER_VERBOSE=1 prints every
 * checker run. nginx -t binds the listen addresses for a moment: the seeds
 * use ports 61000-61999, outside the kernel's ephemeral range and the
 * integration tests' ports.
 *
 * Traffic counting (the agent's default for nginx and haproxy: the access
 * log over syslog to a loopback port) is on for inputs of odd length, off
 * for even ones: both renders are checked, the access log lines against
 * their exact text.
 *
 * A push with a snippet (a listener's, route's or cluster's raw directives)
 * is left out: its text is the writer's, not the renderers' grammar, and
 * the node's checker is meant to refuse some of what passes tether's check;
 * fuzz_snippet covers its check, placement and mapping, t0995 the real
 * consumers. */
#include "fuzz.h"
#include "state/push.h"
#include "consumer/render.h"
#include "consumer/runcmd.h"
#include "state/state.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <regex.h>
#include <stdarg.h>
#include <sodium.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define RENDER_MAX_INPUT (64u * 1024)
#define MARKER "127.0.0.1:7099"
#define TRAFFIC_SYSLOG "127.0.0.1:61999"
#define CHECK_TIMEOUT_S 20.0
#define CACHE_SLOTS 65536u

/* Self-signed (EC P-256, 100 years) pairs the checkers can load; the seeds
 * carry them. */
static const char *const known_certs[] = {
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBqTCCAVCgAwIBAgIUfdfD+E15zFYeoybo3ccz8774b28wCgYIKoZIzj0EAwIw\n"
	"FjEUMBIGA1UEAwwLdGV0aGVyLnRlc3QwIBcNMjYxMTMwMTIyMzM4WhgPMjEyNjEx\n"
	"MDYxMjIzMzhaMBYxFDASBgNVBAMMC3RldGhlci50ZXN0MFkwEwYHKoZIzj0CAQYI\n"
	"KoZIzj0DAQcDQgAEWDZd6fU+st54zYtgxXfOzlcGYO9K4jLOHxHXitpx7VJIYB+a\n"
	"+g1Vlvl4GZGhGZBsVzsOxnThr9c5/v4Fc0YdcaN6MHgwHQYDVR0OBBYEFMaLvBuL\n"
	"F63W7BYk30OLmLzp49N3MB8GA1UdIwQYMBaAFMaLvBuLF63W7BYk30OLmLzp49N3\n"
	"MA8GA1UdEwEB/wQFMAMBAf8wJQYDVR0RBB4wHIILdGV0aGVyLnRlc3SCDSoudGV0\n"
	"aGVyLnRlc3QwCgYIKoZIzj0EAwIDRwAwRAIgZxHhxnNlYn/0Eyj8DiK6+k/utkZO\n"
	"6G1BSjdKl2pMWo8CIEbUl3KM7X4m8b9DGQlO1IwPAwhpj+MxagCZHw7j24cy\n"
	"-----END CERTIFICATE-----\n",
	"-----BEGIN CERTIFICATE-----\n"
	"MIIBgjCCASegAwIBAgIUJ8/1NzkmuP6bt4h4JbzGjJdzkCkwCgYIKoZIzj0EAwIw\n"
	"FTETMBEGA1UEAwwKb3RoZXIudGVzdDAgFw0yNjExMzAxMjIzMzhaGA8yMTI2MTEw\n"
	"NjEyMjMzOFowFTETMBEGA1UEAwwKb3RoZXIudGVzdDBZMBMGByqGSM49AgEGCCqG\n"
	"SM49AwEHA0IABDYOn8Uwky3CVgxxl5pCusEyt0ZahqZltcA9m+h/r/bRFmOwN+qh\n"
	"wwZ1Qdaid7Ln3m1tcPhgsMuTFieeVspl9wmjUzBRMB0GA1UdDgQWBBTjqDeqOjDf\n"
	"amcdEs/2UXT8ux3fETAfBgNVHSMEGDAWgBTjqDeqOjDfamcdEs/2UXT8ux3fETAP\n"
	"BgNVHRMBAf8EBTADAQH/MAoGCCqGSM49BAMCA0kAMEYCIQDOrh44dQZKPh3zO2wJ\n"
	"32rKADhn8obdQlayO4iRZV1LZAIhANMZaY2Vkk0eAmfrleP3y3JzZjUAQ09HDrKM\n"
	"YXNpikVE\n"
	"-----END CERTIFICATE-----\n",
};
static const char *const known_keys[] = {
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgKWC13DBzVTg857fd\n"
	"rlgpA8IaRFpr92fWN5fp6fZ+zOOhRANCAARYNl3p9T6y3njNi2DFd87OVwZg70ri\n"
	"Ms4fEdeK2nHtUkhgH5r6DVWW+XgZkaEZkGxXOw7GdOGv1zn+/gVzRh1x\n"
	"-----END PRIVATE KEY-----\n",
	"-----BEGIN PRIVATE KEY-----\n"
	"MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQg2+RIUmSlwHH7wjoi\n"
	"E9nG7y052jc/7UEslG3ORozCZOOhRANCAAQ2Dp/FMJMtwlYMcZeaQrrBMrdGWoam\n"
	"ZbXAPZvof6/20RZjsDfqocMGdUHWoney595tbXD4YLDLkxYnnlbKZfcJ\n"
	"-----END PRIVATE KEY-----\n",
};
#define NKNOWN (sizeof(known_certs) / sizeof(known_certs[0]))

/* ---- once per process --------------------------------------------------------- */

static bool inited;
static char *nginx_bin, *haproxy_bin;   /* NULL: not available */
static regex_t tolerate;
static bool have_tolerate, verbose;
static uint64_t *cache;                 /* hashes of checked renders, 0 = free */
static size_t cache_used;
static unsigned long n_checked, n_unchecked, n_refused, n_tolerated;
/* the private directory a render is written to for the checkers; the
 * renders name DIR/secrets, so it is one per process (a fixed name keeps
 * equal renders equal for the cache) */
static char workdir[4096], secrets_dir[4200];
static bool have_ipv6;          /* [::1] can be bound here */
static long low_port_limit;     /* ports below it need privileges we lack */

static char *find_program(const char *env, const char *name)
{
	const char *set = getenv(env);
	if (set)
		return *set && access(set, X_OK) == 0 ? strdup(set) : NULL;
	const char *path = getenv("PATH");
	char *dirs = NULL;
	size_t len = strlen(path ? path : "") + sizeof(":/usr/sbin:/usr/local/sbin:/sbin");
	dirs = malloc(len);
	if (!dirs)
		abort();
	snprintf(dirs, len, "%s:/usr/sbin:/usr/local/sbin:/sbin", path ? path : "");
	char *found = NULL, *save = NULL;
	for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
		char cand[4096];
		snprintf(cand, sizeof(cand), "%s/%s", d, name);
		if (*d == '/' && access(cand, X_OK) == 0)
			found = strdup(cand);
	}
	free(dirs);
	return found;
}

/* The shapes of every line the renderers print (anchored), with room for
 * lines a fix may add (server_names_hash_bucket_size; a use_backend of
 * tether_not_found, negated ACLs). */
#define NAME "[A-Za-z0-9._-]+"
#define HOST "[A-Za-z0-9*.-]+"
#define RPATH "/[A-Za-z0-9._~/%:@+,=!*-]*"
#define EPADDR "(\\[[0-9A-Fa-f:.]+\\]|[0-9.]+|[A-Za-z0-9.-]+):[0-9]+"
#define LISTEN "(\\[[0-9A-Fa-f:.]+\\]:[0-9]+|[0-9.]+:[0-9]+|[0-9]+)"
#define SFILE "/[A-Za-z0-9._/-]+/secrets/" NAME "-[0-9a-f]{16}"
/* route and cluster options (consumer/render_opts_*.c): a header name's
 * RFC 7230 token characters, a value's printable ASCII without " \ $ ; { } '
 * (VALCH also without '%', which haproxy's values double), a prefix's
 * regular expression and its replacement */
#define TOKEN "[A-Za-z0-9!#$%&'*+.^_`|~-]+"
#define TOKEN_NQ "[A-Za-z0-9!#$%&*+.^_`|~-]+"
#define VALCH "[] !#&()*+,./0-9:<=>?@A-Z[^_`a-z|~-]"
#define PREFIX_RE "\\^([-A-Za-z0-9_~/%:@,=!]|\\\\[.+*])*\\(/\\(\\.\\*\\)\\)\\?\\$"
#define COND " if \\{ var\\(txn\\.tether_route\\) -m str route/" NAME " \\}"

static const char *const nginx_shapes[] = {
	"",
	"# generated by tetherd: do not edit \\(it is replaced on every change\\)",
	"# listener/" NAME ", (host " HOST "|any other host)",
	"# the agent reads this to see which generation serves",
	"server_names_hash_bucket_size [0-9]+;",
	"upstream tether_c_" NAME " \\{",
	"    (least_conn|random);",
	"    server " EPADDR "( weight=[0-9]+)?;",
	"    server 127\\.0\\.0\\.1:9 down;   # no endpoints: requests get 502",
	"server \\{",
	"    listen " LISTEN "( ssl)?( default_server)?;",
	"    ssl_certificate " SFILE "\\.crt;",
	"    ssl_certificate_key " SFILE "\\.key;",
	"    server_name (_|" HOST ");",
	"    location (/|\\^~ " RPATH ") \\{",
	"        # route/" NAME,
	"        proxy_pass http://tether_c_" NAME ";",
	"        proxy_http_version 1\\.1;",
	"        proxy_set_header Connection \"\";",
	"        proxy_set_header Host \\$host;",
	"        proxy_set_header X-Forwarded-For \\$proxy_add_x_forwarded_for;",
	"        return 404;",
	"    return 404;",
	"    \\}",
	"\\}",
	"    listen 127\\.0\\.0\\.1:7099;",
	"    location = /tether-generation \\{",
	"        default_type text/plain;",
	"        return 200 \"[0-9a-f]{16}\\\\n\";",
	/* traffic counting */
	"# traffic stats: one line per request to the agent \\(docs/gates\\.md\\)",
	"log_format tether_traffic .*",   /* its exact text: traffic_line() */
	"    access_log syslog:server=127\\.0\\.0\\.1:61999,facility=local7,tag=tether,severity=info,nohostname "
	"tether_traffic;",
	"    set \\$tether_route -;",
	"        set \\$tether_route route/" NAME ";",
	"    access_log off;   # probes are not traffic",
};
/* option lines: their quotes, '#', '$' and '\' are checked by these shapes
 * alone (bad_chars does not see them) */
static const char *const nginx_opt_shapes[] = {
	"map \\$http_upgrade \\$tether_connection_upgrade \\{",
	"    default upgrade;",
	"    '' \"\";",
	"# websocket routes: Connection: upgrade when the client asks for one, else",
	"# none \\(the upstream's keepalive\\)",
	"# a route's header name is longer than the default hash bucket holds",
	"proxy_headers_hash_bucket_size (128|256);",
	"    server " EPADDR "( weight=[0-9]+)? max_fails=[0-9]+ fail_timeout=[0-9]+s;",
	"    keepalive [0-9]+;",
	"        proxy_set_header Connection \\$tether_connection_upgrade;",
	"        proxy_set_header Upgrade \\$http_upgrade;",
	"        proxy_set_header \"" TOKEN "\" \"(" VALCH "|%)*\";",
	"        proxy_hide_header \"" TOKEN "\";",
	"        add_header \"" TOKEN "\" \"(" VALCH "|%)*\" always;",
	"        proxy_(connect|read|send)_timeout [0-9]+m?s;",
	"        proxy_next_upstream (off|error timeout);",
	"        proxy_next_upstream_tries [0-9]+;",
	"        client_max_body_size [0-9]+;",
	"        rewrite \"\\(\\?s\\)" PREFIX_RE "\" (/\\$2|/[-A-Za-z0-9._~/:@+,=!*]*\\$1) break;",
};
#define HNAME "([A-Za-z0-9._-]+|'" TOKEN_NQ "'|\"([A-Za-z0-9!#%&'*+.^_`|~-]|\\\\\\$)+\")"
static const char *const haproxy_opt_shapes[] = {
	"backend tether_r_" NAME,
	"    timeout (server|connect|tunnel) [0-9]+m?s",
	"    retries [0-9]+",
	"    option redispatch 1",
	"    http-reuse (always|never)",
	"    server e[0-9]+ " EPADDR " weight [0-9]+( check inter [0-9]+s fall 1 rise 1 observe layer4 error-limit [0-9]+"
	" on-error mark-down)?( pool-max-conn [0-9]+)?",
	"    http-request deny deny_status 413" COND " \\{ req\\.hdr_val\\(content-length\\) gt [0-9]+ \\}",
	"    http-request wait-for-body time 10s at-least [0-9]+" COND " !\\{ req\\.hdr\\(content-length\\) -m found \\}",
	"    http-request deny deny_status 413" COND " \\{ req\\.body_size gt [0-9]+ \\}",
	"    http-(request|after-response) del-header " HNAME COND,
	"    http-(request|after-response) set-header " HNAME " \"(" VALCH "|%%)*\"" COND,
	"    http-request replace-path '" PREFIX_RE "' '(/\\\\2|/[-A-Za-z0-9._~/:@+,=!*]*\\\\1)'" COND,
	"    use_backend tether_[cr]_" NAME COND,
};
#define NNGINX_OPT (sizeof(nginx_opt_shapes) / sizeof(nginx_opt_shapes[0]))
#define NHAPROXY_OPT (sizeof(haproxy_opt_shapes) / sizeof(haproxy_opt_shapes[0]))
static regex_t nginx_opt_re[NNGINX_OPT], haproxy_opt_re[NHAPROXY_OPT];

static const char *const haproxy_shapes[] = {
	"",
	"# generated by tetherd: do not edit \\(it is replaced on every change\\)",
	"# the agent reads this to see which generation serves",
	"frontend tether_l_" NAME,
	"    mode http",
	"    bind (ipv6@\\[[0-9A-Fa-f:.]+\\]:[0-9]+|[0-9.]+:[0-9]+|:[0-9]+)( ssl crt " SFILE "\\.pem)?",
	"    timeout (client|server|connect) [0-9]+s",
	"    option forwardfor",
	"    # route/" NAME,
	"    acl h_" NAME " hdr\\(host\\),field\\(1,:\\) -i (-m end \\." HOST "|" HOST ")",
	"    acl p_" NAME " path_beg " RPATH,
	"    use_backend tether_(c_" NAME "|not_found)( if( !?h_" NAME ")?( !?p_" NAME ")?)?",
	"    default_backend tether_not_found",
	"backend tether_c_" NAME,
	"    balance (roundrobin|leastconn|random)",
	"    server e[0-9]+ " EPADDR " weight [0-9]+",
	"backend tether_not_found",
	"    http-request return status 404 content-type text/plain string \"no route\\\\n\"",
	"frontend tether_marker",
	"    bind 127\\.0\\.0\\.1:7099",
	"    http-request return status 200 content-type text/plain string \"[0-9a-f]{16}\\\\n\""
	" if \\{ path /tether-generation \\}",
	"    http-request return status 404",
	/* traffic counting */
	"    log 127\\.0\\.0\\.1:61999 len 2048 local7 info",
	"    log-format .*",   /* its exact text: traffic_line() */
	"    http-request set-var\\(txn\\.tether_route\\) str\\((-|route/" NAME ")\\)( if( !?h_" NAME ")?( !?p_" NAME ")?)?",
};
#define NNGINX (sizeof(nginx_shapes) / sizeof(nginx_shapes[0]))
#define NHAPROXY (sizeof(haproxy_shapes) / sizeof(haproxy_shapes[0]))
static regex_t nginx_re[NNGINX], haproxy_re[NHAPROXY];

static void compile(regex_t *re, const char *const *shapes, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char anchored[1024];
		snprintf(anchored, sizeof(anchored), "^%s$", shapes[i]);
		if (regcomp(&re[i], anchored, REG_EXTENDED | REG_NOSUB) != 0) {
			fprintf(stderr, "fuzz_render: bad shape %s\n", shapes[i]);
			abort();
		}
	}
}

static void remove_tree(const char *dir);
static void clear_dir(const char *dir);

static void report(void)
{
	if (workdir[0]) {
		remove_tree(workdir);
		workdir[0] = '\0';
	}
	fprintf(stderr,
		"fuzz_render: %lu renders run through a checker, %lu accepted renders not checkable here, "
		"%lu refused by the agent, %lu findings tolerated\n",
		n_checked, n_unchecked, n_refused, n_tolerated);
}

static void init(void)
{
	inited = true;
	if (sodium_init() < 0)
		abort();
	nginx_bin = find_program("FUZZ_NGINX", "nginx");
	haproxy_bin = find_program("FUZZ_HAPROXY", "haproxy");
	const char *tol = getenv("FUZZ_RENDER_TOLERATE");
	if (tol && *tol) {
		if (regcomp(&tolerate, tol, REG_EXTENDED | REG_NOSUB) != 0) {
			fprintf(stderr, "fuzz_render: FUZZ_RENDER_TOLERATE is not a regular expression\n");
			abort();
		}
		have_tolerate = true;
	}
	verbose = getenv("FUZZ_RENDER_VERBOSE") && strcmp(getenv("FUZZ_RENDER_VERBOSE"), "1") == 0;
	compile(nginx_re, nginx_shapes, NNGINX);
	compile(haproxy_re, haproxy_shapes, NHAPROXY);
	compile(nginx_opt_re, nginx_opt_shapes, NNGINX_OPT);
	compile(haproxy_opt_re, haproxy_opt_shapes, NHAPROXY_OPT);
	cache = calloc(CACHE_SLOTS, sizeof(*cache));
	if (!cache)
		abort();
	const char *tmp = getenv("TMPDIR");
	snprintf(workdir, sizeof(workdir), "%s/tether-fuzz-render.XXXXXX", tmp && *tmp == '/' ? tmp : "/tmp");
	if (!mkdtemp(workdir)) {
		fprintf(stderr, "fuzz_render: cannot create %s: %s\n", workdir, strerror(errno));
		abort();
	}
	snprintf(secrets_dir, sizeof(secrets_dir), "%s/secrets", workdir);
	int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_in6 sa6 = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT };
	have_ipv6 = fd >= 0 && bind(fd, (struct sockaddr *)&sa6, sizeof(sa6)) == 0;
	if (fd >= 0)
		close(fd);
	low_port_limit = 1024;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_unprivileged_port_start", "r");
	if (f) {
		if (fscanf(f, "%ld", &low_port_limit) != 1)
			low_port_limit = 1024;
		fclose(f);
	}
	if (geteuid() == 0)
		low_port_limit = 0;
	fprintf(stderr, "fuzz_render: nginx %s, haproxy %s\n", nginx_bin ? nginx_bin : "(none: render-only)",
		haproxy_bin ? haproxy_bin : "(none: render-only)");
	atexit(report);
}

/* ---- failing ------------------------------------------------------------------ */

static void dump_out(const struct render_out *out)
{
	for (size_t i = 0; i < out->n; i++)
		fprintf(stderr, "---- %s (mode %04o%s) ----\n%s\n", out->files[i].path, (unsigned)out->files[i].mode,
			out->files[i].secret ? ", secret" : "", out->files[i].secret ? "(key material)" : out->files[i].data.data);
}

static void fail(const char *renderer, const struct render_out *out, const char *fmt, ...)
	__attribute__((format(printf, 3, 4), noreturn));
static void fail(const char *renderer, const struct render_out *out, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fuzz_render: %s: ", renderer);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, "\n");
	if (out)
		dump_out(out);
	if (workdir[0])
		remove_tree(workdir);
	abort();
}

/* A finding FUZZ_RENDER_TOLERATE may name (a checker's message or a count
 * that is off): counted when it does, fatal when not. */
static void problem(const char *renderer, const struct render_out *out, const char *msg)
{
	if (have_tolerate && regexec(&tolerate, msg, 0, NULL, 0) == 0) {
		n_tolerated++;
		return;
	}
	fail(renderer, out, "%s", msg);
}

/* ---- what the state holds --------------------------------------------------------- */

struct expect {
	size_t routes, listeners, server_names, clusters;
	bool checkable;   /* the checkers can judge it alone */
};

static bool known_pair(const char *cert, const char *key)
{
	for (size_t i = 0; i < NKNOWN; i++)
		if (cert && key && strcmp(cert, known_certs[i]) == 0 && strcmp(key, known_keys[i]) == 0)
			return true;
	return false;
}

static const char *str_field(const cJSON *o, const char *k)
{
	const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
	return cJSON_IsString(v) ? v->valuestring : NULL;
}

static bool ip_literal(const char *s)
{
	unsigned char b[16];
	return inet_pton(AF_INET, s, b) == 1 || inet_pton(AF_INET6, s, b) == 1;
}

static int cmp_ci(const void *a, const void *b)
{
	return strcasecmp(*(char *const *)a, *(char *const *)b);
}

/* nginx -t binds every listen address: only loopback and wildcard
 * addresses (in any spelling) bind on every host. */
static bool listener_checkable(const cJSON *body)
{
	const cJSON *port = cJSON_GetObjectItemCaseSensitive(body, "port");
	if (!cJSON_IsNumber(port) || port->valuedouble < (double)low_port_limit)
		return false;
	const char *a = str_field(body, "address");
	unsigned char b[16];
	if (!a)
		return true;
	if (inet_pton(AF_INET, a, b) == 1)
		return b[0] == 127 || (b[0] | b[1] | b[2] | b[3]) == 0;
	if (inet_pton(AF_INET6, a, b) != 1)
		return false;
	static const unsigned char mapped[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	if (memcmp(b, mapped, 12) == 0)   /* an IPv4 address written as IPv6 */
		return b[12] == 127 || (b[12] | b[13] | b[14] | b[15]) == 0;
	for (int i = 0; i < 15; i++)
		if (b[i])
			return false;
	return have_ipv6 && b[15] <= 1;     /* :: or ::1 */
}

static void expectations(const struct state *s, struct expect *e)
{
	struct rstate rs;
	char err[512];
	memset(e, 0, sizeof(*e));
	if (rstate_load(s, NULL, &rs, err, sizeof(err)) < 0)
		fail("state", NULL, "a committed state does not load: %s", err);
	e->checkable = true;
	e->routes = rs.n[RES_ROUTE];
	e->listeners = rs.n[RES_LISTENER];
	e->clusters = rs.n[RES_CLUSTER];
	for (size_t i = 0; i < rs.n[RES_CLUSTER]; i++) {
		const cJSON *eps = cJSON_GetObjectItemCaseSensitive(rs.by_type[RES_CLUSTER][i].body, "endpoints");
		for (const cJSON *ep = eps ? eps->child : NULL; ep; ep = ep->next) {
			const char *a = str_field(ep, "address");
			if (!a || !(ip_literal(a) || strcmp(a, "localhost") == 0))
				e->checkable = false;
		}
	}
	for (size_t i = 0; i < rs.n[RES_LISTENER]; i++) {
		const struct rres *l = &rs.by_type[RES_LISTENER][i];
		if (!listener_checkable(l->body))
			e->checkable = false;
		const cJSON *tls = cJSON_GetObjectItemCaseSensitive(l->body, "tls");
		const char *sname = cJSON_IsObject(tls) ? str_field(tls, "secret") : NULL;
		if (sname) {
			const struct rres *sec = rstate_find(&rs, RES_SECRET, sname);
			if (!sec || !known_pair(str_field(sec->body, "cert"), str_field(sec->body, "key")))
				e->checkable = false;
		}
		/* the distinct hosts (without case) of its routes */
		char **hosts = calloc(rs.n[RES_ROUTE] + 1, sizeof(char *));
		if (!hosts)
			abort();
		size_t nh = 0;
		bool any = false;
		for (size_t k = 0; k < rs.n[RES_ROUTE]; k++) {
			const cJSON *rb = rs.by_type[RES_ROUTE][k].body;
			const char *ln = str_field(rb, "listener");
			if (!ln || strcmp(ln, l->bare) != 0)
				continue;
			const char *h = str_field(rb, "host");
			if (!h)
				h = "*";
			any |= strcmp(h, "*") == 0;
			hosts[nh++] = (char *)h;
		}
		qsort(hosts, nh, sizeof(char *), cmp_ci);
		for (size_t k = 0; k < nh; k++)
			if (k == 0 || strcasecmp(hosts[k], hosts[k - 1]) != 0)
				e->server_names++;
		if (!any)
			e->server_names++;   /* the default server */
		free(hosts);
	}
	rstate_release(&rs);
}

/* ---- render-only checks --------------------------------------------------------------- */

static size_t count_prefix(const char *text, const char *prefix)
{
	size_t n = 0, pl = strlen(prefix);
	for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (strncmp(p, prefix, pl) == 0)
			n++;
	return n;
}

/* The access log format lines, exactly (their quotes and braces are the
 * renderers' own, no input's). */
static bool traffic_line(const char *line)
{
	return strcmp(line, "log_format tether_traffic escape=none 'tether1 " RENDER_GEN_TOKEN
			    " $status ${request_time}s $tether_route';") == 0 ||
	       strcmp(line, "    log-format \"tether1 " RENDER_GEN_TOKEN
			    " %ST %Ta%[str(ms)] %[var(txn.tether_route)]\"") == 0;
}

/* The characters of one non-comment line of nginx or haproxy text. */
static const char *bad_chars(const char *line, bool nginx)
{
	size_t len = strlen(line);
	const char *semi = strchr(line, ';');
	/* nginx: the empty upstream's "down;   # ..." is the one trailing
	 * comment */
	const char *hash = strchr(line, '#');
	if (hash) {
		if (!nginx || !semi || semi > hash)
			return "'#' in a directive";
		len = (size_t)(semi - line) + 1;
	}
	for (size_t i = 0; i < len; i++) {
		char c = line[i];
		if (c == ';' && (!nginx || i != len - 1))
			return "';' not at the end";
		if (c == '{' && !(i == len - 1 && (i == 0 || line[i - 1] == ' ')) &&
		    strstr(line, "if { path /tether-generation }") == NULL)
			return "'{' not opening a block";
		if (c == '}' && strspn(line, " ") != i && strstr(line, "if { path /tether-generation }") == NULL)
			return "'}' not closing a block";
		if (c == '\'' || c == '`')
			return "a single quote or backquote";
		if (c == '\\' && !strstr(line, "\\n\""))
			return "a backslash";
		if (c == '"' && !strstr(line, "proxy_set_header Connection \"\";") &&
		    !strstr(line, " return 200 \"") && !strstr(line, " string \""))
			return "a double quote";
	}
	return NULL;
}

static void check_text(const char *renderer, const struct render_out *out, bool nginx, const struct expect *e)
{
	const char *text = out->files[0].data.data;
	regex_t *re = nginx ? nginx_re : haproxy_re;
	size_t nre = nginx ? NNGINX : NHAPROXY;
	const char *p = text;
	while (*p) {
		const char *nl = strchr(p, '\n');
		if (!nl)
			fail(renderer, out, "the last line has no newline: '%s'", p);
		size_t len = (size_t)(nl - p);
		char *line = malloc(len + 1);
		if (!line)
			abort();
		memcpy(line, p, len);
		line[len] = '\0';
		for (size_t k = 0; k < len; k++)
			if ((unsigned char)line[k] < 0x20 || (unsigned char)line[k] >= 0x7f)
				fail(renderer, out, "a control or non-ASCII byte in '%s'", line);
		bool comment = line[strspn(line, " ")] == '#';
		bool fixed = traffic_line(line);
		regex_t *ore = nginx ? nginx_opt_re : haproxy_opt_re;
		size_t nore = nginx ? NNGINX_OPT : NHAPROXY_OPT;
		for (size_t i = 0; i < nore && !fixed; i++)
			fixed = regexec(&ore[i], line, 0, NULL, 0) == 0;
		if (!fixed && (strncmp(line, "log_format", 10) == 0 || strncmp(line, "    log-format", 14) == 0))
			fail(renderer, out, "a log format of no known text: '%s'", line);
		const char *why = comment || fixed ? NULL : bad_chars(line, nginx);
		if (why) {
			fprintf(stderr, "fuzz_render: %s: %s in:\n", renderer, why);
			fail(renderer, out, "'%s'", line);
		}
		bool ok = fixed && !traffic_line(line);
		for (size_t i = 0; i < nre && !ok; i++)
			ok = regexec(&re[i], line, 0, NULL, 0) == 0;
		if (!ok)
			fail(renderer, out, "a line of no known shape: '%s'", line);
		free(line);
		p = nl + 1;
	}
	char msg[160];
	if (nginx) {
		size_t pp = count_prefix(text, "        proxy_pass "), sn = count_prefix(text, "    server_name ");
		if (pp != e->routes || sn != e->server_names) {
			snprintf(msg, sizeof(msg), "%zu proxy_pass for %zu routes, %zu server_name for %zu", pp, e->routes,
				 sn, e->server_names);
			problem(renderer, out, msg);
		}
		size_t ups = count_prefix(text, "upstream ");
		if (ups != e->clusters) {
			snprintf(msg, sizeof(msg), "%zu upstreams for %zu clusters", ups, e->clusters);
			problem(renderer, out, msg);
		}
	} else {
		size_t ub = count_prefix(text, "    use_backend tether_c_") + count_prefix(text, "    use_backend tether_r_");
		size_t fe = count_prefix(text, "frontend tether_l_");
		size_t be = count_prefix(text, "backend tether_c_");
		if (ub != e->routes || fe != e->listeners || be != e->clusters) {
			snprintf(msg, sizeof(msg), "%zu use_backend for %zu routes, %zu frontends for %zu, %zu backends for %zu",
				 ub, e->routes, fe, e->listeners, be, e->clusters);
			problem(renderer, out, msg);
		}
	}
	for (size_t i = 0; i < out->n; i++) {
		const struct render_file *f = &out->files[i];
		bool want_secret = i > 0;
		if (f->secret != want_secret || f->mode != (want_secret ? 0600 : 0644) || !f->path[0] ||
		    strchr(f->path, '/') || f->path[0] == '.')
			fail(renderer, out, "file '%s' has the wrong kind, mode or name", f->path);
	}
}

/* ---- the checkers ----------------------------------------------------------------------- */

static uint64_t out_hash(const char *renderer, const struct render_out *out)
{
	crypto_generichash_state hs;
	uint64_t h;
	crypto_generichash_init(&hs, NULL, 0, sizeof(h));
	crypto_generichash_update(&hs, (const unsigned char *)renderer, strlen(renderer) + 1);
	for (size_t i = 0; i < out->n; i++) {
		crypto_generichash_update(&hs, (const unsigned char *)out->files[i].path, strlen(out->files[i].path) + 1);
		crypto_generichash_update(&hs, (const unsigned char *)out->files[i].data.data, out->files[i].data.len);
		crypto_generichash_update(&hs, (const unsigned char *)"", 1);
	}
	crypto_generichash_final(&hs, (unsigned char *)&h, sizeof(h));
	return h ? h : 1;
}

/* True when h was checked before; records it. */
static bool seen_before(uint64_t h)
{
	size_t i = (size_t)(h % CACHE_SLOTS);
	while (cache[i]) {
		if (cache[i] == h)
			return true;
		i = (i + 1) % CACHE_SLOTS;
	}
	if (cache_used >= CACHE_SLOTS / 2) {
		memset(cache, 0, CACHE_SLOTS * sizeof(*cache));
		cache_used = 0;
		i = (size_t)(h % CACHE_SLOTS);
	}
	cache[i] = h;
	cache_used++;
	return false;
}

static void put_file(const char *dir, const char *sub, const char *name, const char *data, size_t len, mode_t mode)
{
	struct buf path = BUF_INIT;
	buf_printf(&path, "%s%s/%s", dir, sub, name);
	int fd = open(path.data, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
	if (fd < 0) {
		fprintf(stderr, "fuzz_render: cannot create %s: %s\n", path.data, strerror(errno));
		abort();
	}
	buf_release(&path);
	for (size_t off = 0; off < len;) {
		ssize_t w = write(fd, data + off, len - off);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			abort();
		off += (size_t)w;
	}
	close(fd);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st;
	(void)flag;
	(void)ftw;
	remove(path);
	return 0;
}

static void remove_tree(const char *dir)
{
	nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static int rm_below(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return ftw->level > 0 ? rm_one(path, st, flag, ftw) : 0;
}

/* Empties dir, keeping it. */
static void clear_dir(const char *dir)
{
	nftw(dir, rm_below, 16, FTW_DEPTH | FTW_PHYS);
}

/* Runs the checker over out written into a fresh directory; aborts when it
 * refuses (unless tolerated). */
static void run_checker(const char *renderer, const struct render_out *out, bool nginx)
{
	const char *bin = nginx ? nginx_bin : haproxy_bin;
	const char *dir = workdir;
	clear_dir(dir);
	if (mkdir(secrets_dir, 0700) < 0) {
		fprintf(stderr, "fuzz_render: cannot create %s: %s\n", secrets_dir, strerror(errno));
		abort();
	}
	for (size_t i = 0; i < out->n; i++) {
		const struct render_file *f = &out->files[i];
		put_file(dir, f->secret ? "/secrets" : "", f->path, f->data.data, f->data.len, f->mode);
	}
	struct buf cmd = BUF_INIT;
	if (nginx) {
		struct buf wrap = BUF_INIT;
		buf_printf(&wrap, "# for `nginx -t` of this generation alone (tetherd runs it before going live)\n"
				  "error_log stderr;\nevents {}\nhttp {\n    include %s/*.conf;\n}\n", dir);
		put_file(dir, "", "check.nginx", wrap.data, wrap.len, 0644);
		buf_release(&wrap);
		buf_printf(&cmd, "'%s' -t -q -p '%s' -e stderr -c '%s/check.nginx'", bin, dir, dir);
	} else {
		buf_printf(&cmd, "'%s' -c -q -f '%s/tether.cfg'", bin, dir);
	}
	struct runcmd_result res;
	char err[512];
	if (runcmd(cmd.data, NULL, CHECK_TIMEOUT_S, &res, err, sizeof(err)) < 0) {
		fprintf(stderr, "fuzz_render: %s\n", err);
		abort();
	}
	n_checked++;
	bool refused = res.exit_code != 0 || res.timed_out;
	/* nginx takes a server whose name another server on the address
	 * has (without case) with a warning and ignores it: routes lost */
	bool warned = nginx && strstr(res.output, "[warn]") && !strstr(res.output, "could not build optimal");
	if (verbose)
		fprintf(stderr, "fuzz_render: %s: exit %d %s\n", cmd.data, res.exit_code, res.output);
	if ((refused || warned) && !nginx && !res.output[0]) {
		/* -q hides haproxy's alerts: ask again for the message */
		buf_reset(&cmd);
		buf_printf(&cmd, "'%s' -c -f '%s/tether.cfg'", bin, dir);
		struct runcmd_result again;
		if (runcmd(cmd.data, NULL, CHECK_TIMEOUT_S, &again, err, sizeof(err)) == 0)
			memcpy(res.output, again.output, sizeof(res.output));
	}
	buf_release(&cmd);
	clear_dir(dir);
	if (!refused && !warned)
		return;
	char how[RUNCMD_OUTPUT_MAX + 64], msg[RUNCMD_OUTPUT_MAX + 256];
	runcmd_describe(&res, how, sizeof(how));
	snprintf(msg, sizeof(msg), "%s %s the configuration the agent accepted: %s", bin,
		 refused ? "refused" : "warned about", how);
	problem(renderer, out, msg);
}

/* ---- the target ----------------------------------------------------------------------- */

static void gen_id(const struct render_out *out, char id[17])
{
	unsigned char h[8];
	crypto_generichash_state hs;
	crypto_generichash_init(&hs, NULL, 0, sizeof(h));
	for (size_t i = 0; i < out->n; i++)
		crypto_generichash_update(&hs, (const unsigned char *)out->files[i].data.data, out->files[i].data.len);
	crypto_generichash_final(&hs, h, sizeof(h));
	for (size_t i = 0; i < sizeof(h); i++)
		snprintf(id + 2 * i, 3, "%02x", h[i]);
}

static bool same_out(const struct render_out *a, const struct render_out *b)
{
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		const struct render_file *x = &a->files[i], *y = &b->files[i];
		if (strcmp(x->path, y->path) != 0 || x->mode != y->mode || x->secret != y->secret ||
		    x->data.len != y->data.len || memcmp(x->data.data, y->data.data, x->data.len) != 0)
			return false;
	}
	return true;
}

static void one_renderer(const struct renderer *r, const struct state *empty, const struct candidate *c,
			 const struct state *s, const struct expect *e, bool counting)
{
	bool nginx = r == &render_nginx;
	struct render_opts o = { .secrets_dir = secrets_dir, .marker = MARKER,
				 .traffic_syslog = counting ? TRAFFIC_SYSLOG : NULL, .skip_secret_check = true };
	struct render_out with = { 0 }, committed = { 0 }, again = { 0 };
	char err1[1024] = "", err2[1024] = "", err3[1024] = "";
	int rc1 = r->render(empty, c, &o, &with, err1, sizeof(err1));
	int rc2 = r->render(s, NULL, &o, &committed, err2, sizeof(err2));
	int rc3 = r->render(s, NULL, &o, &again, err3, sizeof(err3));
	if (rc1 != rc2 || rc2 != rc3 || strcmp(err1, err2) != 0 || strcmp(err2, err3) != 0)
		fail(r->name, NULL, "the candidate's render and the committed state's differ: %s", err1[0] ? err1 : err2);
	if (rc1 < 0) {
		if (!err1[0])
			fail(r->name, NULL, "%s", "a render refused without a reason");
		n_refused++;
		goto out;
	}
	if (!same_out(&with, &committed) || !same_out(&committed, &again))
		fail(r->name, &with, "%s", "the same state rendered different bytes");
	char id[17];
	gen_id(&committed, id);
	r->marker(&committed.files[0].data, &o, id);
	if (!strstr(committed.files[0].data.data, id))
		fail(r->name, &committed, "%s", "the marker lacks the generation id");
	check_text(r->name, &committed, nginx, e);

	const char *bin = nginx ? nginx_bin : haproxy_bin;
	if (!bin || !e->checkable) {
		n_unchecked++;
		goto out;
	}
	if (seen_before(out_hash(r->name, &committed)))
		goto out;
	/* the files as a generation has them: the secrets under DIR/secrets */
	run_checker(r->name, &committed, nginx);
out:
	render_out_release(&with);
	render_out_release(&committed);
	render_out_release(&again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (!inited)
		init();
	if (size > RENDER_MAX_INPUT)
		return 0;
	struct json_limits lim = { RENDER_MAX_INPUT, 32 };
	struct push p;
	char err[1024] = "";
	if (push_decode((const char *)data, size, &lim, &p, err, sizeof(err)) < 0) {
		if (!err[0])
			fail("push", NULL, "%s", "a push refused without a reason");
		n_refused++;
		return 0;
	}
	for (size_t i = 0; i < p.nup; i++) {
		if (cJSON_GetObjectItemCaseSensitive(p.up[i].body, "snippet")) {
			push_release(&p);
			return 0;
		}
	}
	struct state empty, s;
	struct candidate c, cc;
	state_init(&empty);
	state_init(&s);
	if (candidate_build(&empty, &p, 0, &c, err, sizeof(err)) < 0) {
		if (!err[0])
			fail("candidate", NULL, "%s", "a candidate refused without a reason");
		n_refused++;
		goto out;
	}
	/* the committed state: the same push built again and committed */
	if (candidate_build(&s, &p, 0, &cc, err, sizeof(err)) < 0)
		fail("candidate", NULL, "the same push built twice: refused the second time: %s", err);
	state_commit(&s, &cc);
	candidate_release(&cc);
	struct expect e;
	expectations(&s, &e);
	one_renderer(&render_nginx, &empty, &c, &s, &e, size & 1);
	one_renderer(&render_haproxy, &empty, &c, &s, &e, size & 1);
	candidate_release(&c);
out:
	state_release(&s);
	state_release(&empty);
	push_release(&p);
	return 0;
}
