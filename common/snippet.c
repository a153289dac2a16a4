/* snippet.c: the check of a resource's snippet (see snippet.h): nginx's
 * tokenizer (as ngx_conf_read_token reads: words, quotes, escapes, '#'
 * comments, ';', '{', '}') and haproxy's line reader, each with the list
 * of what a snippet may not say. The lists are docs/protocol.md's. */
#include "snippet.h"
#include "util.h"
#include "xmalloc.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define WORD_SHOW 48

static int fail_at(char *err, size_t errlen, unsigned line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int fail_at(char *err, size_t errlen, unsigned line, const char *fmt, ...)
{
	int n = snprintf(err, errlen, "line %u: ", line);
	if (n < 0 || (size_t)n >= errlen)
		return -1;
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
	va_end(ap);
	return -1;
}

/* A word of len n as the consumer reads it for a keyword, lower-cased,
 * its quotes and escapes' backslashes dropped (more dropped than the
 * consumer would is only stricter), cut to cap - 1 bytes. */
static void word_lc(const char *w, size_t n, char *out, size_t cap)
{
	size_t k = 0;
	for (size_t i = 0; i < n && k + 1 < cap; i++)
		if (w[i] != '"' && w[i] != '\'' && w[i] != '\\')
			out[k++] = (char)tolower((unsigned char)w[i]);
	out[k] = '\0';
}

static bool has(const char *s, const char *sub)
{
	return strstr(s, sub) != NULL;
}

static bool starts(const char *s, const char *pre)
{
	return strncmp(s, pre, strlen(pre)) == 0;
}

static bool ends(const char *s, const char *suf)
{
	size_t a = strlen(s), b = strlen(suf);
	return a >= b && strcmp(s + a - b, suf) == 0;
}

static bool in_list(const char *s, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(s, *list) == 0)
			return true;
	return false;
}

/* Bytes no snippet holds: control characters but tab and newline (a CR
 * would hide a line from a reader), DEL, and our marker. */
static int check_text(const char *text, char *err, size_t errlen)
{
	unsigned line = 1;
	size_t n = strlen(text);
	if (n > SNIPPET_MAX) {
		snprintf(err, errlen, "%zu bytes, more than %d: move the rest into a structured field or split it",
			 n, SNIPPET_MAX);
		return -1;
	}
	for (const char *p = text; *p; p++) {
		unsigned char c = (unsigned char)*p;
		if (c == '\n')
			line++;
		else if ((c < 0x20 && c != '\t') || c == 0x7f)
			return fail_at(err, errlen, line, "control character 0x%02x: only tab and newline may appear", c);
	}
	const char *mark = strstr(text, SNIPPET_MARK);
	if (mark) {
		line = 1;
		for (const char *p = text; p < mark; p++)
			line += *p == '\n';
		return fail_at(err, errlen, line, "'%s' is tether's marker of a snippet's bounds: remove it",
			       SNIPPET_MARK);
	}
	return 0;
}

/* ---- nginx ---------------------------------------------------------- */

/* Why directive d (lower case) is refused, or NULL. */
static const char *nginx_refused(const char *d)
{
	static const char *const scope[] = {
		"server", "upstream", "location", "http", "stream", "events", "mail", "map", "geo", "types",
		"split_clients", "match", "charset_map", NULL,
	};
	static const char *const files[] = {
		"include", "root", "alias", "try_files", "autoindex", "ssi", "dav_methods", "dav_access",
		"create_full_put_path", "min_delete_depth", "client_body_in_file_only", "proxy_store", "fastcgi_store",
		"uwsgi_store", "scgi_store", "lock_file", "working_directory", "pid", "open_log_file_cache",
		/* content handlers that serve files from the default root */
		"mp4", "flv", "hls", "f4f", "random_index",
		/* an upstream's state file (NGINX Plus) */
		"state",
		/* a DTD file (xslt), QUIC's token key file */
		"xml_entities", "quic_host_key", NULL,
	};
	static const char *const process[] = {
		"load_module", "env", "user", "daemon", "master_process", "thread_pool", "ssl_engine",
		"google_perftools_profiles", "debug_points", "api", NULL,
	};
	static const char *const elsewhere[] = { "mirror", "post_action", NULL };
	static const char *const addresses[] = { "listen", "server_name", NULL };
	if (in_list(d, scope))
		return "it opens a new scope outside the resource's block";
	if (has(d, "lua") || has(d, "perl") || has(d, "mruby") || has(d, "wasm") || has(d, "python") ||
	    starts(d, "js_") || starts(d, "njs") || starts(d, "modsecurity") || starts(d, "xslt_") ||
	    starts(d, "opentracing") || starts(d, "opentelemetry") || starts(d, "otel_") ||
	    starts(d, "passenger") || starts(d, "pagespeed"))
		return "it runs code in the consumer";
	/* well-known third-party modules: directory listings of the root,
	 * logins against the node's own accounts */
	if (starts(d, "fancyindex") || starts(d, "auth_pam"))
		return "it reads files or accounts on the node";
	if (in_list(d, addresses))
		return "it changes the addresses and hosts the block serves (the listener's and the routes' fields do)";
	if (in_list(d, process) || starts(d, "worker_"))
		return "it changes the consumer's process";
	/* a cookie's Path attribute, not a file: the one *_path that is not */
	if (strcmp(d, "proxy_cookie_path") == 0)
		return NULL;
	if (in_list(d, files) || starts(d, "dav_") || starts(d, "ssi") || starts(d, "geoip") ||
	    ends(d, "_file") || ends(d, "_path") || has(d, "certificate") || has(d, "_crl") ||
	    has(d, "dhparam") || has(d, "ticket_key") || has(d, "conf_command"))
		return "it reads or writes files on the node";
	if (ends(d, "_log") || strcmp(d, "log_format") == 0)
		return "it writes logs (tether's traffic log is the agent's)";
	if (ends(d, "_pass"))
		return "it sends requests past the route's cluster";
	if (in_list(d, elsewhere))
		return "it sends requests outside the route";
	return NULL;
}

static bool nginx_name_char(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* A statement's first word: a bare name, not refused; opening a block
 * only as if or limit_except do. */
static int nginx_directive(const char *w, size_t n, bool bare, bool block, bool listener, unsigned line,
			   char *err, size_t errlen)
{
	char d[WORD_SHOW + 1];
	word_lc(w, n, d, sizeof(d));
	bool ok = bare && n <= WORD_SHOW;
	for (size_t i = 0; ok && i < n; i++)
		ok = nginx_name_char(w[i]);
	if (!ok) {
		char show[STR_SHOW_BUF];
		return fail_at(err, errlen, line, "'%s': a directive's name must be a bare word of letters, digits and '_'",
			       str_show(d, show));
	}
	const char *why = nginx_refused(d);
	if (why)
		return fail_at(err, errlen, line, "'%s' is refused in a snippet: %s (docs/protocol.md lists what is)",
			       d, why);
	if (block && strcmp(d, "if") != 0 && strcmp(d, "limit_except") != 0)
		return fail_at(err, errlen, line, "'%s {': only if and limit_except may open a block in a snippet", d);
	/* every location sets its own proxy headers, so nginx inherits none
	 * of the server's: one here would be silently dropped */
	if (listener && strcmp(d, "proxy_set_header") == 0)
		return fail_at(err, errlen, line, "'proxy_set_header' in a listener's snippet never reaches a route "
			       "(each route's location sets its own proxy headers, and nginx then inherits none): "
			       "set it in the route's headers.request.set or the route's snippet");
	return 0;
}

/* Any word naming one of tether's own names (upstream tether_c_*, the
 * traffic log's $tether_route and format): a snippet may not touch them. */
static int own_names(const char *w, size_t n, unsigned line, char *err, size_t errlen)
{
	for (size_t i = 0; i + 7 <= n; i++)
		if (strncasecmp(w + i, "tether_", 7) == 0)
			return fail_at(err, errlen, line, "'tether_' names are tether's own: a snippet may not use them");
	return 0;
}

/* A word of an if's condition that tests the node's files (-f, -d, -e,
 * -x, negated or not, after the condition's '('): it would tell whether a
 * path exists on the node. */
static int nginx_file_test(const char *w, size_t n, unsigned line, char *err, size_t errlen)
{
	char x[16];
	word_lc(w, n, x, sizeof(x));
	const char *t = x + (x[0] == '(');
	const char *shown = t;
	t += t[0] == '!';
	if (t[0] == '-' && t[1] && strchr("fdex", t[1]) && t[2] == '\0')
		return fail_at(err, errlen, line, "'if (%s ...)' is refused in a snippet: it tests the node's files "
			       "(docs/protocol.md lists what is)", shown);
	return 0;
}

#define NGINX_DEPTH 8

int snippet_check_nginx(const char *s, bool listener, char *err, size_t errlen)
{
	if (check_text(s, err, errlen) < 0)
		return -1;
	unsigned line = 1, stmt_line = 1;
	int depth = 0;
	size_t words = 0, i = 0, n = strlen(s);
	const char *first = NULL;
	size_t first_n = 0;
	bool first_bare = false;
	while (i < n) {
		char c = s[i];
		if (c == ' ' || c == '\t' || c == '\n') {
			line += c == '\n';
			i++;
			continue;
		}
		if (c == '#') {
			while (i < n && s[i] != '\n')
				i++;
			continue;
		}
		if (c == ';' || c == '{') {
			if (words == 0)
				return fail_at(err, errlen, line, "unexpected '%c' (no directive before it)", c);
			if (nginx_directive(first, first_n, first_bare, c == '{', listener, stmt_line, err, errlen) < 0)
				return -1;
			if (c == '{' && ++depth > NGINX_DEPTH)
				return fail_at(err, errlen, line, "blocks nest more than %d deep", NGINX_DEPTH);
			words = 0;
			i++;
			continue;
		}
		if (c == '}') {
			if (words)
				return fail_at(err, errlen, line, "unexpected '}': the statement before it lacks its ';'");
			if (depth == 0)
				return fail_at(err, errlen, line, "'}' closes a block the snippet did not open "
						"(it would close tether's own)");
			depth--;
			i++;
			continue;
		}
		/* a word */
		size_t start = i;
		bool bare = true;
		unsigned wline = line;
		if (c == '"' || c == '\'') {
			bare = false;
			for (i++;; i++) {
				if (i >= n)
					return fail_at(err, errlen, wline, "unterminated %s quote",
						       c == '"' ? "double" : "single");
				if (s[i] == '\\' && i + 1 < n) {
					i++;
					line += s[i] == '\n';
				} else if (s[i] == c) {
					break;
				} else if (s[i] == '\n') {
					line++;
				}
			}
			i++;
			/* nginx wants a space, ';' or '{' after a closing quote */
			if (i < n && !strchr(" \t\n;{)", s[i]))
				return fail_at(err, errlen, line, "unexpected '%c' after a quoted string", s[i]);
		} else {
			bool variable = false;
			while (i < n) {
				char ch = s[i];
				if (ch == '{' && variable) {   /* ${name} */
					i++;
					continue;
				}
				variable = false;
				if (ch == '\\' && i + 1 < n) {
					bare = false;
					line += s[i + 1] == '\n';
					i += 2;
					continue;
				}
				if (ch == '$')
					variable = true;
				else if (ch == ' ' || ch == '\t' || ch == '\n' || ch == ';' || ch == '{')
					break;
				i++;
			}
		}
		if (own_names(s + start, i - start, wline, err, errlen) < 0)
			return -1;
		if (words > 0 && first_n == 2 && strncmp(first, "if", 2) == 0 &&
		    nginx_file_test(s + start, i - start, wline, err, errlen) < 0)
			return -1;
		if (words++ == 0) {
			first = s + start;
			first_n = i - start;
			first_bare = bare;
			stmt_line = wline;
		}
	}
	if (words)
		return fail_at(err, errlen, stmt_line, "the last statement lacks its ';'");
	if (depth)
		return fail_at(err, errlen, line, "%d block(s) left open: a '}' is missing", depth);
	return 0;
}

/* ---- haproxy -------------------------------------------------------- */

/* Why first word k (lower case, after a "no" or "default" prefix) of a line is refused,
 * or NULL; next is the word after it ("" when none). */
static const char *haproxy_refused_first(const char *k, const char *next)
{
	static const char *const sections[] = {
		"global", "defaults", "frontend", "backend", "listen", "userlist", "peers", "resolvers", "program",
		"cache", "ring", "http-errors", "mailers", "crt-store", "log-forward", "fcgi-app", "traces", "acme",
		"namespace_list", NULL,
	};
	static const char *const process[] = {
		"setenv", "presetenv", "resetenv", "unsetenv", "chroot", "user", "group", "uid", "gid", "daemon",
		"external-check", "stats", NULL,
	};
	static const char *const routing[] = {
		"server", "server-template", "default-server", "use_backend", "default_backend", "use-server",
		"dispatch", "bind", "use-fcgi-app", NULL,
	};
	static const char *const logs[] = {
		"log", "log-format", "log-format-sd", "error-log-format", "log-tag", "log-steps", NULL,
	};
	static const char *const options[] = {
		"http_proxy", "transparent", "external-check", "httplog", "tcplog", "httpslog", "dontlognull",
		"dontlog-normal", "log-separate-errors", "log-health-checks", "logasap", NULL,
	};
	if (in_list(k, sections))
		return "it starts a new section";
	if (in_list(k, process))
		return "it changes the consumer's process or exposes its sockets";
	if (in_list(k, routing))
		return "it routes past tether's listeners and clusters";
	if (in_list(k, logs))
		return "it sends logs (tether's traffic log is the agent's)";
	if (has(k, "file"))
		return "it reads files on the node";
	if (strcmp(k, "filter") == 0 || strcmp(k, "email-alert") == 0)
		return "it talks to other processes";
	if (strcmp(k, "option") == 0 && in_list(next, options))
		return "this option forwards past the cluster or changes the logs";
	if ((strcmp(k, "http-check") == 0 || strcmp(k, "tcp-check") == 0) && strcmp(next, "connect") == 0)
		return "it sends health checks to another address";
	/* the frontend's routing ACLs are "h_ROUTE" and "p_ROUTE"; haproxy ORs
	 * the declarations of one name, so another would reroute the route */
	if (strcmp(k, "acl") == 0 && (starts(next, "h_") || starts(next, "p_")))
		return "'h_' and 'p_' ACL names are tether's own (its routes' host and path conditions: one more "
		       "declaration would route other requests to that route); name yours otherwise";
	return NULL;
}

/* Why word w (lower case) is refused anywhere in a line, or NULL. */
static const char *haproxy_refused_word(const char *w)
{
	static const char *const files[] = {
		"file", "lf-file", "errorfile", "errorfiles", "-f", "crt", "crt-list", "ca-file", "crl-file", NULL,
	};
	if (starts(w, "lua") || has(w, "lua.") || has(w, "lua-"))
		return "it runs Lua code";
	if (in_list(w, files) || ends(w, "-file") || has(w, "file(") || has(w, "-base"))
		return "it reads files on the node";
	if (has(w, "map(") || has(w, "map_") || has(w, "map-") || has(w, "acl("))
		return "it reads map or ACL files on the node";
	if (has(w, "env("))
		return "it reads the consumer's environment";
	if (has(w, "jwt_verify("))
		return "it reads files on the node";
	if (strcmp(w, "use-service") == 0 || starts(w, "set-dst"))
		return "it routes past the route's cluster";
	if (has(w, "tether_"))
		return "'tether_' names are tether's own";
	return NULL;
}

#define HAPROXY_WORDS 64

struct hword {
	const char *s;   /* raw, quotes included */
	size_t n;
	bool quoted;     /* holds a quote or an escape: never a keyword */
};

/* Splits line l (len n) into words as haproxy's parser does; a '#' outside
 * quotes ends it. Refuses an unterminated quote, a continuation, and '$'
 * expansions (haproxy replaces "$NAME" and "${NAME}" outside single quotes
 * by the environment). */
static int haproxy_words(const char *l, size_t n, unsigned line, struct hword *w, size_t *nw, bool *comment,
			 char *err, size_t errlen)
{
	*nw = 0;
	*comment = false;
	size_t i = 0;
	while (i < n) {
		if (l[i] == ' ' || l[i] == '\t') {
			i++;
			continue;
		}
		if (l[i] == '#') {
			*comment = true;
			break;
		}
		if (*nw == HAPROXY_WORDS)
			return fail_at(err, errlen, line, "more than %d words", HAPROXY_WORDS);
		struct hword *x = &w[(*nw)++];
		x->s = l + i;
		x->quoted = false;
		char q = 0;
		for (; i < n; i++) {
			char c = l[i];
			if (q == 0 && (c == ' ' || c == '\t' || c == '#'))
				break;
			if (c == '\\' && q != '\'') {
				if (i + 1 >= n)
					return fail_at(err, errlen, line, "a '\\' at a line's end: continuations are refused "
							"in a snippet (one rule a line)");
				/* haproxy decodes "\xHH" into any byte: a keyword
				 * spelled so would pass the word checks below */
				if (l[i + 1] == 'x' || l[i + 1] == 'X')
					return fail_at(err, errlen, line, "'\\x' escapes are refused in a snippet (haproxy "
							"decodes them after tether's check): write the character itself");
				x->quoted = true;
				i++;
				continue;
			}
			if (c == '$' && q != '\'' && i + 1 < n &&
			    (l[i + 1] == '{' || l[i + 1] == '_' || l[i + 1] == '.' || isalpha((unsigned char)l[i + 1])))
				return fail_at(err, errlen, line, "'$' expands the consumer's environment: refused in a "
						"snippet (write the value, or a '$' in single quotes)");
			if (q == 0 && (c == '"' || c == '\'')) {
				q = c;
				x->quoted = true;
			} else if (q && c == q) {
				q = 0;
			}
		}
		if (q)
			return fail_at(err, errlen, line, "unterminated %s quote", q == '"' ? "double" : "single");
		x->n = (size_t)(l + i - x->s);
	}
	return 0;
}

int snippet_check_haproxy(const char *s, bool route, char *err, size_t errlen)
{
	if (check_text(s, err, errlen) < 0)
		return -1;
	unsigned line = 0;
	for (const char *p = s; *p;) {
		const char *nl = strchr(p, '\n');
		size_t len = nl ? (size_t)(nl - p) : strlen(p);
		struct hword w[HAPROXY_WORDS];
		size_t nw;
		bool comment;
		line++;
		if (haproxy_words(p, len, line, w, &nw, &comment, err, errlen) < 0)
			return -1;
		p += len + (nl != NULL);
		if (!nw)
			continue;
		char k[WORD_SHOW + 1], next[WORD_SHOW + 1] = "", show[STR_SHOW_BUF];
		size_t at = 0;
		word_lc(w[0].s, w[0].n, k, sizeof(k));
		/* "no option x", "default log ...": haproxy's prefixes */
		if ((strcmp(k, "no") == 0 || strcmp(k, "default") == 0) && nw > 1) {
			at++;
			word_lc(w[at].s, w[at].n, k, sizeof(k));
		}
		if (at + 1 < nw)
			word_lc(w[at + 1].s, w[at + 1].n, next, sizeof(next));
		if (w[at].quoted || k[0] == '.')
			return fail_at(err, errlen, line, "'%s': a line must start with a bare keyword (no quotes, "
					"no '.' directives)", str_show(k, show));
		const char *why = haproxy_refused_first(k, next);
		if (why)
			return fail_at(err, errlen, line, "'%s' is refused in a snippet: %s (docs/protocol.md lists what is)",
				       k, why);
		if (route && strcmp(k, "http-request") != 0 && strcmp(k, "http-response") != 0)
			return fail_at(err, errlen, line, "'%s': a route's haproxy snippet holds only http-request and "
					"http-response rules (put other lines in its listener's or cluster's snippet)",
					str_show(k, show));
		/* the renderer appends the route's condition to the line: a
		 * comment would swallow it */
		if (route && comment)
			return fail_at(err, errlen, line, "a comment after a route's rule: put it on a line of its own");
		for (size_t j = 0; j < nw; j++) {
			char *x = xmalloc(w[j].n + 1);
			word_lc(w[j].s, w[j].n, x, w[j].n + 1);
			why = haproxy_refused_word(x);
			if (why) {
				fail_at(err, errlen, line, "'%s' is refused in a snippet: %s (docs/protocol.md lists what is)",
					str_show(x, show), why);
				free(x);
				return -1;
			}
			/* haproxy drops the quotes before it looks for a
			 * condition: a quoted "if" is one too */
			const char *cond = strcmp(x, "if") == 0 ? "if" : strcmp(x, "unless") == 0 ? "unless" : NULL;
			free(x);
			if (route && cond)
				return fail_at(err, errlen, line, "'%s': a route's rule takes the route's condition, which "
						"tether adds: drop the condition (quoted or not, haproxy reads it as one)", cond);
		}
	}
	return 0;
}

/* ---- the field ------------------------------------------------------ */

int snippet_validate(const char *res, const cJSON *body, bool strict, char *err, size_t errlen)
{
	const cJSON *sn = cJSON_GetObjectItemCaseSensitive(body, "snippet");
	if (!sn)
		return 0;
	if (!cJSON_IsObject(sn)) {
		snprintf(err, errlen, "%s: snippet must be an object: {\"nginx\": TEXT, \"haproxy\": TEXT}", res);
		return -1;
	}
	bool route = strncmp(res, "route/", 6) == 0;
	for (const cJSON *c = sn->child; c; c = c->next) {
		char show[STR_SHOW_BUF], e[400];
		bool nginx = strcmp(c->string, "nginx") == 0, haproxy = strcmp(c->string, "haproxy") == 0;
		if (!nginx && !haproxy) {
			if (!strict)
				continue;
			snprintf(err, errlen, "%s: snippet: unknown field '%s' (known: nginx, haproxy)", res,
				 str_show(c->string, show));
			return -1;
		}
		if (!cJSON_IsString(c)) {
			snprintf(err, errlen, "%s: snippet.%s must be a string of %s directives", res, c->string,
				 c->string);
			return -1;
		}
		int rc = nginx ? snippet_check_nginx(c->valuestring, strncmp(res, "listener/", 9) == 0, e, sizeof(e))
			       : snippet_check_haproxy(c->valuestring, route, e, sizeof(e));
		if (rc < 0) {
			snprintf(err, errlen, "%s: snippet.%s: %s", res, c->string, e);
			return -1;
		}
	}
	return 0;
}
