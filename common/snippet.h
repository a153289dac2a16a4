/* snippet.h: a resource's "snippet" field: raw directives for one consumer
 * ({"nginx": TEXT, "haproxy": TEXT}) that its renderer pastes into the
 * resource's block. One check, shared by the plane (before a write) and the
 * agent (before a render): the size, the characters, each consumer's syntax
 * as far as it decides the block's bounds (nginx's tokens, quotes, braces;
 * haproxy's lines, quotes, comments) and the directives that reach outside
 * the block's purpose (files, code, logs, other proxies, tether's own
 * names). docs/protocol.md lists every refused directive. What passes is
 * judged by the node's own checker (nginx -t, haproxy -c) at the canary. */
#ifndef TETHER_SNIPPET_H
#define TETHER_SNIPPET_H

#include <stdbool.h>
#include <stddef.h>
#include <cjson/cJSON.h>

#define SNIPPET_MAX 16384     /* bytes per consumer's text */

/* The marker lines a renderer writes around a snippet, so a checker's
 * refusal of one of its lines maps to the resource's snippet
 * (consumer/checkmap.h): SNIPPET_MARK " TYPE/NAME snippet.CONSUMER" before,
 * SNIPPET_MARK_END after. A snippet may not contain SNIPPET_MARK. */
#define SNIPPET_MARK "#tether-snippet"
#define SNIPPET_MARK_END "#tether-snippet-end"

/* Validates the "snippet" field of body, the body of res ("route/api", a
 * listener, route or cluster; any other type has no such field): absent is
 * fine; else an object of "nginx" and "haproxy" strings (either optional;
 * with strict, no other key). Returns 0, or -1 with err "res: snippet.nginx:
 * line 3: ...". */
int snippet_validate(const char *res, const cJSON *body, bool strict, char *err, size_t errlen);

/* The consumers' checks of one text (what snippet_validate runs): 0, or -1
 * with err ("line 3: 'include' is refused in a snippet: ..."). route:
 * haproxy's route form (every line an http-request or http-response rule
 * without a condition: the renderer adds the route's). listener: nginx's
 * listener form (no proxy_set_header: no location would inherit it). */
int snippet_check_nginx(const char *text, bool listener, char *err, size_t errlen);
int snippet_check_haproxy(const char *text, bool route, char *err, size_t errlen);

#endif
