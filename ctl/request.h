/* request.h: one request of tetherctl to the plane (credentials from the
 * options and the environment) and its JSON answer, shared by every
 * command file. */
#ifndef TETHER_CTL_REQUEST_H
#define TETHER_CTL_REQUEST_H

#include <stddef.h>
#include <cjson/cJSON.h>

#include "client.h"
#include "commands.h"

/* Depth accepted when reading JSON: the plane allows up to 512 levels in
 * a body (--max-depth), and its answers wrap bodies in a few more. */
#define CTL_JSON_DEPTH 520

/* One request to the plane. Returns 0 with the answer (release its body),
 * or 1 after printing why it failed. */
struct credentials;
/* The planes of --plane (urls, room for CLIENT_MAX_PLANES; free with
 * client_planes_free) and the credentials of the command line (*token:
 * wipe with credentials_forget). Returns their count, or -1 after saying
 * why (nothing left to free). */
int ctl_planes(const struct ctl_ctx *cx, char **urls, char **token, struct credentials *cr);

int ctl_call(const struct ctl_ctx *cx, const char *method, const char *path, const char *body, size_t body_len,
	     struct client_answer *ans);
/* The same, but a refusal of the plane (an HTTP answer other than 2xx)
 * is not printed: returns -1 with ans->status set and the plane's message
 * in refusal, for the caller to word (sync maps names back to files). */
int ctl_call_refusal(const struct ctl_ctx *cx, const char *method, const char *path, const char *body,
		     size_t body_len, struct client_answer *ans, char *refusal, size_t refusal_len);
/* A stale plane's answer (its Tether-Stale header): a warning on stderr
 * that its view may be old. */
void ctl_warn_stale(const struct ctl_ctx *cx, const struct client_answer *ans);
/* Parses an answer of the plane; NULL after printing why. */
cJSON *ctl_answer_json(const struct client_answer *ans);
/* Prints "version N" from {"version": N, "changed": bool} and what its
 * rollout does (or, with --json, the plane's answer as it came); 0 or 1. */
int ctl_print_version(const struct ctl_ctx *cx, const struct client_answer *ans);
/* What a write's answer says its rollout does, in words ("queued behind
 * rollout 5 (stage 2 of 3)"), new allocated; NULL: nothing to say. */
char *ctl_rollout_words(const cJSON *answer);

/* Reads FILE (or "-" for standard input, whole, pipes included; at most
 * CTL_MAX_INPUT) and checks it is a JSON object (what names it in the
 * message) before the plane sees it: a quick local answer for a typo, the
 * plane still judges. Returns a new allocated text (*len set), or NULL
 * after printing why. */
char *ctl_read_json_object(const char *path, const char *what, size_t *len);
/* The same for a plaintext secret: read into one buffer (no realloc'd
 * copies left behind), the probe tree and, on failure, the text wiped.
 * The caller wipes the text (sodium_memzero) before freeing it. */
char *ctl_read_json_object_secret(const char *path, const char *what, size_t *len);

#endif
