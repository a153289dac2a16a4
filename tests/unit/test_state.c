/* test_state.c: unit tests of agent/state/state.c: candidates from pushes checked
 * whole, referrer counts and path indexes across commits, strict mode. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "state/push.h"
#include "state/state.h"

#define CL(port) "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":" #port "}]}"
#define LS "{\"port\":8080}"
#define RT(l, c) "{\"listener\":\"" l "\",\"cluster\":\"" c "\"}"
#define SECRET "{\"cert\":\"-----BEGIN CERTIFICATE-----\",\"key\":\"-----BEGIN KEY-----\"}"
#define FILEAT(path) "{\"path\":\"" path "\",\"content\":\"x\"}"

/* Decodes text as a push and builds a candidate; returns its result. */
static int build(const struct state *s, const char *text, unsigned flags, struct candidate *c, char *err,
		 size_t errlen)
{
	struct push p;
	char derr[512];
	if (push_decode(text, strlen(text), NULL, &p, derr, sizeof(derr)) < 0)
		fail_msg("test push does not decode: %s\n%s", derr, text);
	err[0] = '\0';
	int rc = candidate_build(s, &p, flags, c, err, errlen);
	push_release(&p);
	return rc;
}

/* Builds and commits; returns the number of changes, or -1 with err. */
static int apply_flags(struct state *s, const char *text, unsigned flags, char *err, size_t errlen)
{
	struct candidate c;
	if (build(s, text, flags, &c, err, errlen) < 0)
		return -1;
	int n = (int)c.n;
	state_commit(s, &c);
	assert_int_equal(c.n, 0);
	assert_null(c.items);
	candidate_release(&c);
	return n;
}

static int apply(struct state *s, const char *text, char *err, size_t errlen)
{
	return apply_flags(s, text, 0, err, errlen);
}

/* Applies text and fails the test when it is refused. */
static int must_apply(struct state *s, const char *text)
{
	char err[512];
	int n = apply(s, text, err, sizeof(err));
	if (n < 0)
		fail_msg("refused: %s\n%s", err, text);
	return n;
}

/* Expects text to be refused with exactly msg, and s to be unchanged. */
static void must_refuse(struct state *s, const char *text, unsigned flags, const char *msg)
{
	char err[512];
	struct candidate c;
	uint64_t v = s->version;
	size_t count = s->count, raw = s->raw_bytes;
	memset(&c, 0x5a, sizeof(c));
	int rc = build(s, text, flags, &c, err, sizeof(err));
	if (rc == 0) {
		candidate_release(&c);
		fail_msg("accepted, wanted '%s'\n%s", msg, text);
	}
	assert_string_equal(err, msg);
	/* a failed build leaves nothing to free */
	assert_int_equal(c.n, 0);
	assert_null(c.items);
	assert_int_equal(s->version, v);
	assert_int_equal(s->count, count);
	assert_int_equal(s->raw_bytes, raw);
}

static uint32_t referrers(const struct state *s, const char *name)
{
	const struct res *r = state_get(s, name);
	if (!r)
		fail_msg("%s is not in the state", name);
	return r->referrers;
}

/* ---- whole-state invariants ------------------------------------------------ */

struct inv_ctx {
	const struct state *s;
	size_t count, raw;
	int bad;
};

struct refcount_ctx {
	const char *name;
	uint32_t n;
};

static void count_one(void *ctx, const struct res *r)
{
	struct refcount_ctx *rc = ctx;
	for (int i = 0; i < r->nrefs; i++)
		if (strcmp(r->refs[i], rc->name) == 0)
			rc->n++;
}

static void count_refs_to(void *ctx, const struct res *r)
{
	struct inv_ctx *ic = ctx;
	ic->count++;
	ic->raw += strlen(r->name) + r->body_len;
	/* referrers equals a recount */
	struct refcount_ctx rc = { r->name, 0 };
	state_each(ic->s, count_one, &rc);
	if (rc.n != r->referrers) {
		print_error("%s: referrers %u, recount %u\n", r->name, r->referrers, rc.n);
		ic->bad++;
	}
	/* every reference resolves */
	for (int i = 0; i < r->nrefs; i++) {
		if (!state_get(ic->s, r->refs[i])) {
			print_error("%s: dangling reference to %s\n", r->name, r->refs[i]);
			ic->bad++;
		}
	}
	/* the path index names the file at its path */
	if (r->file_path) {
		const char *owner = pathindex_file_at(&ic->s->paths, r->file_path);
		if (!owner || strcmp(owner, r->name) != 0) {
			print_error("%s: path '%s' indexed to %s\n", r->name, r->file_path, owner ? owner : "nothing");
			ic->bad++;
		}
	}
	/* the map key is the resource's own name */
	if (state_get(ic->s, r->name) != r) {
		print_error("%s: lookup does not find it\n", r->name);
		ic->bad++;
	}
}

static void check_invariants(const struct state *s)
{
	struct inv_ctx ic = { s, 0, 0, 0 };
	state_each(s, count_refs_to, &ic);
	assert_int_equal(ic.bad, 0);
	assert_int_equal(ic.count, s->count);
	assert_int_equal(ic.raw, s->raw_bytes);
	assert_true(s->count * 4 <= s->cap * 3 || s->count == 0);
}

/* ---- a base state --------------------------------------------------------- */

#define BASE_PUSH                                                                             \
	"{\"version\":1,\"nonce\":\"n1\",\"full\":true,\"upserts\":["                          \
	"{\"name\":\"cluster/a\",\"body\":" CL(80) "},"                                        \
	"{\"name\":\"cluster/b\",\"body\":" CL(81) "},"                                        \
	"{\"name\":\"listener/l\",\"body\":" LS "},"                                           \
	"{\"name\":\"route/r\",\"body\":" RT("l", "a") "}]}"

static int setup(void **state)
{
	struct state *s = malloc(sizeof(*s));
	if (!s)
		return -1;
	state_init(s);
	*state = s;
	return 0;
}

static int teardown(void **state)
{
	struct state *s = *state;
	state_release(s);
	free(s);
	return 0;
}

/* ---- tests ------------------------------------------------------------------- */

static void test_empty_state(void **state)
{
	struct state *s = *state;
	assert_int_equal(s->version, 0);
	assert_int_equal(s->count, 0);
	assert_int_equal(s->raw_bytes, 0);
	assert_null(state_get(s, "cluster/a"));
	check_invariants(s);
}

static void test_snapshot_into_empty_state(void **state)
{
	struct state *s = *state;
	assert_int_equal(must_apply(s, BASE_PUSH), 4);
	assert_int_equal(s->version, 1);
	assert_int_equal(s->count, 4);
	const struct res *r = state_get(s, "route/r");
	assert_non_null(r);
	assert_string_equal(r->name, "route/r");
	/* canonical: keys sorted, compact */
	assert_string_equal(r->body, "{\"cluster\":\"a\",\"listener\":\"l\"}");
	assert_int_equal(r->body_len, strlen(r->body));
	assert_int_equal(r->version, 1);
	assert_int_equal(r->nrefs, 2);
	assert_int_equal(referrers(s, "cluster/a"), 1);
	assert_int_equal(referrers(s, "cluster/b"), 0);
	assert_int_equal(referrers(s, "listener/l"), 1);
	assert_int_equal(referrers(s, "route/r"), 0);
	size_t raw = 0;
	static const char *const names[] = { "cluster/a", "cluster/b", "listener/l", "route/r" };
	for (int i = 0; i < 4; i++)
		raw += strlen(names[i]) + state_get(s, names[i])->body_len;
	assert_int_equal(s->raw_bytes, raw);
	assert_null(state_get(s, "cluster/c"));
	assert_null(state_get(s, "route"));
	check_invariants(s);
}

static void test_delta_applied(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	/* route/r moves from cluster a to b; a new cluster c; a's body changes */
	const char *d = "{\"version\":5,\"base\":1,\"nonce\":\"n2\",\"upserts\":["
			"{\"name\":\"route/r\",\"version\":5,\"body\":" RT("l", "b") "},"
			"{\"name\":\"cluster/c\",\"body\":" CL(90) "},"
			"{\"name\":\"cluster/a\",\"version\":4,\"body\":" CL(82) "}]}";
	struct candidate c;
	char err[512];
	assert_int_equal(build(s, d, 0, &c, err, sizeof(err)), 0);
	assert_int_equal(c.version, 5);
	assert_int_equal(c.base, 1);
	assert_false(c.full);
	assert_string_equal(c.nonce, "n2");
	assert_int_equal(c.n, 3);
	/* building does not touch the state */
	assert_int_equal(s->version, 1);
	assert_null(state_get(s, "cluster/c"));
	assert_string_equal(state_get(s, "route/r")->body, "{\"cluster\":\"a\",\"listener\":\"l\"}");
	/* replacements know what they replace; new resources do not */
	for (size_t i = 0; i < c.n; i++) {
		assert_non_null(c.items[i].new_res);
		if (strcmp(c.items[i].new_res->name, "cluster/c") == 0)
			assert_null(c.items[i].old);
		else
			assert_ptr_equal(c.items[i].old, state_get(s, c.items[i].new_res->name));
	}
	state_commit(s, &c);
	candidate_release(&c);
	assert_int_equal(s->version, 5);
	assert_int_equal(s->count, 5);
	assert_string_equal(state_get(s, "route/r")->body, "{\"cluster\":\"b\",\"listener\":\"l\"}");
	assert_int_equal(state_get(s, "cluster/a")->version, 4);   /* the upsert's own version */
	assert_int_equal(state_get(s, "cluster/c")->version, 5);   /* the push's version when absent */
	assert_int_equal(state_get(s, "cluster/b")->version, 1);   /* untouched */
	assert_int_equal(referrers(s, "cluster/a"), 0);
	assert_int_equal(referrers(s, "cluster/b"), 1);
	check_invariants(s);
	/* a removes now */
	assert_int_equal(must_apply(s, "{\"version\":6,\"base\":5,\"nonce\":\"n3\",\"removed\":[\"cluster/a\"]}"), 1);
	assert_null(state_get(s, "cluster/a"));
	assert_int_equal(s->count, 4);
	check_invariants(s);
}

static void test_unchanged_bodies_dropped(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	size_t raw = s->raw_bytes;
	/* the same body, other key order and spacing: no change */
	const char *d = "{\"version\":2,\"base\":1,\"nonce\":\"n2\",\"upserts\":["
			"{\"name\":\"route/r\",\"body\":{ \"cluster\" : \"a\", \"listener\":\"l\"}},"
			"{\"name\":\"cluster/a\",\"body\":{\"endpoints\":[{\"port\":80,\"address\":\"10.0.0.1\"}]}}]}";
	struct candidate c;
	char err[512];
	assert_int_equal(build(s, d, 0, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 0);
	state_commit(s, &c);
	/* an empty push still moves the version */
	assert_int_equal(s->version, 2);
	assert_int_equal(s->count, 4);
	assert_int_equal(s->raw_bytes, raw);
	/* and the resources keep the version of their last real change */
	assert_int_equal(state_get(s, "route/r")->version, 1);
	candidate_release(&c);
	/* a snapshot equal to the state */
	const char *snap = "{\"version\":3,\"nonce\":\"n3\",\"full\":true,\"upserts\":["
			   "{\"name\":\"route/r\",\"body\":" RT("l", "a") "},"
			   "{\"name\":\"listener/l\",\"body\":" LS "},"
			   "{\"name\":\"cluster/b\",\"body\":" CL(81) "},"
			   "{\"name\":\"cluster/a\",\"body\":" CL(80) "}]}";
	assert_int_equal(build(s, snap, 0, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 0);
	assert_true(c.full);
	candidate_release(&c);
	check_invariants(s);
}

static void test_snapshot_removals(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	/* a snapshot without cluster/b removes it */
	const char *snap = "{\"version\":5,\"nonce\":\"n5\",\"full\":true,\"upserts\":["
			   "{\"name\":\"cluster/a\",\"body\":" CL(80) "},"
			   "{\"name\":\"listener/l\",\"body\":" LS "},"
			   "{\"name\":\"route/r\",\"body\":" RT("l", "a") "}]}";
	struct candidate c;
	char err[512];
	assert_int_equal(build(s, snap, 0, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 1);
	assert_null(c.items[0].new_res);
	assert_non_null(c.items[0].old);
	assert_string_equal(c.items[0].old->name, "cluster/b");
	state_commit(s, &c);
	candidate_release(&c);
	assert_int_equal(s->version, 5);
	assert_int_equal(s->count, 3);
	assert_null(state_get(s, "cluster/b"));
	check_invariants(s);
	/* a snapshot without a referenced cluster but with its route: refused */
	must_refuse(s, "{\"version\":6,\"nonce\":\"n6\",\"full\":true,\"upserts\":["
		       "{\"name\":\"listener/l\",\"body\":" LS "},"
		       "{\"name\":\"route/r\",\"body\":" RT("l", "a") "}]}", 0,
		    "cannot remove cluster/a: route/r refers to it");
	/* without both: fine, and an empty snapshot empties the state */
	assert_int_equal(must_apply(s, "{\"version\":7,\"nonce\":\"n7\",\"full\":true,\"upserts\":["
				       "{\"name\":\"listener/l\",\"body\":" LS "}]}"), 2);
	assert_int_equal(s->count, 1);
	assert_int_equal(referrers(s, "listener/l"), 0);
	assert_int_equal(must_apply(s, "{\"version\":8,\"nonce\":\"n8\",\"full\":true}"), 1);
	assert_int_equal(s->count, 0);
	assert_int_equal(s->raw_bytes, 0);
	assert_int_equal(s->version, 8);
	check_invariants(s);
}

static void test_route_before_its_cluster(void **state)
{
	struct state *s = *state;
	/* make-before-break is checked on the whole candidate, not in order */
	const char *p = "{\"version\":1,\"nonce\":\"n1\",\"full\":true,\"upserts\":["
			"{\"name\":\"route/r\",\"body\":" RT("l", "z") "},"
			"{\"name\":\"listener/l\",\"body\":{\"port\":443,\"tls\":{\"secret\":\"s\"}}},"
			"{\"name\":\"secret/s\",\"body\":" SECRET "},"
			"{\"name\":\"cluster/z\",\"body\":" CL(80) "}]}";
	assert_int_equal(must_apply(s, p), 4);
	assert_int_equal(referrers(s, "cluster/z"), 1);
	assert_int_equal(referrers(s, "listener/l"), 1);
	assert_int_equal(referrers(s, "secret/s"), 1);
	check_invariants(s);
}

static void test_unknown_references(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	must_refuse(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"upserts\":[{\"name\":\"route/z\",\"body\":"
		       RT("l", "z") "}]}", 0, "route/z: unknown cluster 'z'");
	must_refuse(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"upserts\":[{\"name\":\"route/z\",\"body\":"
		       RT("nol", "a") "}]}", 0, "route/z: unknown listener 'nol'");
	must_refuse(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"upserts\":[{\"name\":\"listener/t\",\"body\":"
		       "{\"port\":443,\"tls\":{\"secret\":\"nos\"}}}]}", 0, "listener/t: unknown secret 'nos'");
	/* referring to what the same push removes */
	must_refuse(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"upserts\":[{\"name\":\"route/z\",\"body\":"
		       RT("l", "b") "}],\"removed\":[\"cluster/b\"]}", 0, "route/z: unknown cluster 'b'");
	/* a snapshot that lacks a referenced resource */
	must_refuse(s, "{\"version\":2,\"nonce\":\"x\",\"full\":true,\"upserts\":[{\"name\":\"route/r\",\"body\":"
		       RT("l", "a") "},{\"name\":\"listener/l\",\"body\":" LS "}]}", 0,
		    "cannot remove cluster/a: route/r refers to it");
	check_invariants(s);
}

static void test_remove_referenced_refused(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	must_refuse(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"removed\":[\"cluster/a\"]}", 0,
		    "cannot remove cluster/a: route/r refers to it");
	must_refuse(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"removed\":[\"listener/l\",\"cluster/b\"]}", 0,
		    "cannot remove listener/l: route/r refers to it");
	/* the route in the same push, still pointing at it */
	must_refuse(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"upserts\":[{\"name\":\"route/r\",\"body\":"
		       RT("l", "a") "}],\"removed\":[\"cluster/a\"]}", 0,
		    "cannot remove cluster/a: route/r refers to it");
	/* a second route to the same cluster keeps it referenced */
	must_apply(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"upserts\":[{\"name\":\"route/q\",\"body\":"
		      RT("l", "a") "}]}");
	assert_int_equal(referrers(s, "cluster/a"), 2);
	must_refuse(s, "{\"version\":3,\"base\":2,\"nonce\":\"x\",\"removed\":[\"cluster/a\",\"route/r\"]}", 0,
		    "cannot remove cluster/a: route/q refers to it");
	assert_int_equal(referrers(s, "cluster/a"), 2);
	check_invariants(s);
}

static void test_remove_referrer_and_referenced_together(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	/* the referenced first in the list: still fine */
	assert_int_equal(must_apply(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"removed\":[\"cluster/a\",\"route/r\"]}"),
			 2);
	assert_null(state_get(s, "cluster/a"));
	assert_null(state_get(s, "route/r"));
	assert_int_equal(referrers(s, "listener/l"), 0);
	check_invariants(s);
	/* and the other order */
	must_apply(s, "{\"version\":3,\"base\":2,\"nonce\":\"x\",\"upserts\":[{\"name\":\"route/r\",\"body\":"
		      RT("l", "b") "}]}");
	assert_int_equal(referrers(s, "cluster/b"), 1);
	assert_int_equal(must_apply(s, "{\"version\":4,\"base\":3,\"nonce\":\"x\",\"removed\":[\"route/r\",\"listener/l\","
				       "\"cluster/b\"]}"), 3);
	assert_int_equal(s->count, 0);
	check_invariants(s);
}

static void test_referrers_after_commits_in_any_order(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	/* replace a cluster and its route in one push, in both orders */
	must_apply(s, "{\"version\":2,\"base\":1,\"nonce\":\"x\",\"upserts\":["
		      "{\"name\":\"cluster/a\",\"body\":" CL(100) "},"
		      "{\"name\":\"route/r\",\"body\":{\"listener\":\"l\",\"cluster\":\"a\",\"host\":\"x.example\"}}]}");
	assert_int_equal(referrers(s, "cluster/a"), 1);
	assert_int_equal(referrers(s, "listener/l"), 1);
	check_invariants(s);
	must_apply(s, "{\"version\":3,\"base\":2,\"nonce\":\"x\",\"upserts\":["
		      "{\"name\":\"route/r\",\"body\":" RT("l", "a") "},"
		      "{\"name\":\"cluster/a\",\"body\":" CL(101) "},"
		      "{\"name\":\"listener/l\",\"body\":{\"port\":8081}}]}");
	assert_int_equal(referrers(s, "cluster/a"), 1);
	assert_int_equal(referrers(s, "listener/l"), 1);
	check_invariants(s);
	/* move the route to a new cluster created after it in the push */
	must_apply(s, "{\"version\":4,\"base\":3,\"nonce\":\"x\",\"upserts\":["
		      "{\"name\":\"route/r\",\"body\":" RT("l", "n") "},"
		      "{\"name\":\"cluster/n\",\"body\":" CL(7) "}]}");
	assert_int_equal(referrers(s, "cluster/a"), 0);
	assert_int_equal(referrers(s, "cluster/n"), 1);
	check_invariants(s);
	/* replace the cluster and remove its only route */
	must_apply(s, "{\"version\":5,\"base\":4,\"nonce\":\"x\",\"upserts\":["
		      "{\"name\":\"cluster/n\",\"body\":" CL(8) "}],\"removed\":[\"route/r\"]}");
	assert_int_equal(referrers(s, "cluster/n"), 0);
	assert_int_equal(referrers(s, "listener/l"), 0);
	check_invariants(s);
	/* three routes, then removed one at a time */
	must_apply(s, "{\"version\":6,\"base\":5,\"nonce\":\"x\",\"upserts\":["
		      "{\"name\":\"route/r1\",\"body\":" RT("l", "n") "},"
		      "{\"name\":\"route/r2\",\"body\":" RT("l", "n") "},"
		      "{\"name\":\"route/r3\",\"body\":" RT("l", "b") "}]}");
	assert_int_equal(referrers(s, "cluster/n"), 2);
	assert_int_equal(referrers(s, "cluster/b"), 1);
	assert_int_equal(referrers(s, "listener/l"), 3);
	must_apply(s, "{\"version\":7,\"base\":6,\"nonce\":\"x\",\"removed\":[\"route/r1\"],\"upserts\":["
		      "{\"name\":\"route/r3\",\"body\":" RT("l", "n") "}]}");
	assert_int_equal(referrers(s, "cluster/n"), 2);
	assert_int_equal(referrers(s, "cluster/b"), 0);
	assert_int_equal(referrers(s, "listener/l"), 2);
	must_refuse(s, "{\"version\":8,\"base\":7,\"nonce\":\"x\",\"removed\":[\"cluster/n\",\"route/r2\"]}", 0,
		    "cannot remove cluster/n: route/r3 refers to it");
	must_apply(s, "{\"version\":8,\"base\":7,\"nonce\":\"x\",\"removed\":[\"cluster/n\",\"route/r2\",\"route/r3\","
		      "\"cluster/b\"]}");
	assert_int_equal(referrers(s, "listener/l"), 0);
	check_invariants(s);
	/* a snapshot that replaces everything, referenced after referrers */
	must_apply(s, "{\"version\":9,\"nonce\":\"x\",\"full\":true,\"upserts\":["
		      "{\"name\":\"route/r\",\"body\":" RT("m", "a") "},"
		      "{\"name\":\"route/q\",\"body\":" RT("m", "a") "},"
		      "{\"name\":\"listener/m\",\"body\":" LS "},"
		      "{\"name\":\"cluster/a\",\"body\":" CL(1) "}]}");
	assert_int_equal(referrers(s, "cluster/a"), 2);
	assert_int_equal(referrers(s, "listener/m"), 2);
	assert_null(state_get(s, "listener/l"));
	check_invariants(s);
}

static void test_strict_mode(void **state)
{
	struct state *s = *state;
	const char *p = "{\"version\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/a\",\"body\":"
			"{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}],\"zone\":\"eu\"}}]}";
	must_refuse(s, p, STATE_STRICT, "cluster/a: unknown field 'zone' (known: endpoints, lb, health, keepalive, snippet)");
	must_refuse(s, "{\"version\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/a\",\"body\":"
		       "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80,\"az\":1}]}}]}", STATE_STRICT,
		    "cluster/a: endpoints[0]: unknown field 'az' (known: address, port, weight)");
	/* without --strict the field is kept, in the canonical body */
	char err[512];
	assert_int_equal(apply_flags(s, p, 0, err, sizeof(err)), 1);
	assert_string_equal(state_get(s, "cluster/a")->body,
			    "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}],\"zone\":\"eu\"}");
	/* known fields are checked either way */
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/b\",\"body\":" CL(0) "}]}", 0,
		    "cluster/b: endpoints[0].port must be an integer in 1..65535");
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"listener/l\",\"body\":[]}]}", 0,
		    "listener/l: body must be a JSON object");
	check_invariants(s);
}

static void test_named_twice(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/c\",\"body\":" CL(1) "},"
		       "{\"name\":\"cluster/c\",\"body\":" CL(2) "}]}", 0, "cluster/c: named twice in one push");
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/b\",\"body\":" CL(1) "}],"
		       "\"removed\":[\"cluster/b\"]}", 0, "cluster/b: named twice in one push");
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"removed\":[\"cluster/b\",\"cluster/b\"]}", 0,
		    "cluster/b: named twice in one push");
	/* the same body twice is still named twice */
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/a\",\"body\":" CL(80) "},"
		       "{\"name\":\"cluster/a\",\"body\":" CL(80) "}]}", 0, "cluster/a: named twice in one push");
}

static void test_remove_absent_is_no_change(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	struct candidate c;
	char err[512];
	assert_int_equal(build(s, "{\"version\":2,\"nonce\":\"n\",\"removed\":[\"cluster/zz\",\"file/none\"]}", 0, &c, err,
			       sizeof(err)), 0);
	assert_int_equal(c.n, 0);
	candidate_release(&c);
}

static void test_files_same_path_refused(void **state)
{
	struct state *s = *state;
	must_refuse(s, "{\"version\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/a\",\"body\":" FILEAT("x/y") "},"
		       "{\"name\":\"file/b\",\"body\":" FILEAT("x/y") "}]}", 0,
		    "file/b: path 'x/y' is already the path of file/a");
	must_apply(s, "{\"version\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/a\",\"body\":" FILEAT("x/y") "}]}");
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/b\",\"body\":" FILEAT("x/y") "}]}", 0,
		    "file/b: path 'x/y' is already the path of file/a");
	/* rewriting a file at its own path is fine */
	must_apply(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/a\",\"body\":"
		      "{\"path\":\"x/y\",\"content\":\"new\"}}]}");
	assert_string_equal(pathindex_file_at(&s->paths, "x/y"), "file/a");
	check_invariants(s);
}

static void test_file_under_file_refused(void **state)
{
	struct state *s = *state;
	must_refuse(s, "{\"version\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/a\",\"body\":" FILEAT("x") "},"
		       "{\"name\":\"file/b\",\"body\":" FILEAT("x/y") "}]}", 0,
		    "file/a: path 'x' is a directory of other files");
	must_refuse(s, "{\"version\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/b\",\"body\":" FILEAT("x/y") "},"
		       "{\"name\":\"file/a\",\"body\":" FILEAT("x") "}]}", 0,
		    "file/b: path 'x/y' lies under 'x', the path of file/a");
	must_apply(s, "{\"version\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/a\",\"body\":" FILEAT("d/x") "}]}");
	/* a file where a directory of files is */
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/b\",\"body\":" FILEAT("d") "}]}", 0,
		    "file/b: path 'd' is a directory of other files");
	/* a file under a file */
	must_refuse(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/b\",\"body\":" FILEAT("d/x/z") "}]}",
		    0, "file/b: path 'd/x/z' lies under 'd/x', the path of file/a");
	/* a sibling is fine */
	must_apply(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/b\",\"body\":" FILEAT("d/y") "}]}");
	assert_int_equal(pathindex_files_under(&s->paths, "d"), 2);
	check_invariants(s);
}

static void test_moving_a_files_path(void **state)
{
	struct state *s = *state;
	must_apply(s, "{\"version\":1,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/a\",\"body\":" FILEAT("x") "},"
		      "{\"name\":\"file/b\",\"body\":" FILEAT("y") "}]}");
	/* a moves away and c takes its old path, in one push */
	must_apply(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/c\",\"body\":" FILEAT("x") "},"
		      "{\"name\":\"file/a\",\"body\":" FILEAT("z") "}]}");
	assert_string_equal(pathindex_file_at(&s->paths, "x"), "file/c");
	assert_string_equal(pathindex_file_at(&s->paths, "z"), "file/a");
	assert_string_equal(state_get(s, "file/a")->file_path, "z");
	check_invariants(s);
	/* swap two paths */
	must_apply(s, "{\"version\":3,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/b\",\"body\":" FILEAT("z") "},"
		      "{\"name\":\"file/a\",\"body\":" FILEAT("y") "}]}");
	assert_string_equal(pathindex_file_at(&s->paths, "y"), "file/a");
	assert_string_equal(pathindex_file_at(&s->paths, "z"), "file/b");
	check_invariants(s);
	/* a file moves into a directory, and a new file takes its place... */
	must_apply(s, "{\"version\":4,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/a\",\"body\":" FILEAT("y/a") "}]}");
	assert_null(pathindex_file_at(&s->paths, "y"));
	assert_int_equal(pathindex_files_under(&s->paths, "y"), 1);
	/* ...and back out of it: the directory it leaves is a free path */
	must_apply(s, "{\"version\":5,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/a\",\"body\":" FILEAT("y") "}]}");
	assert_int_equal(pathindex_files_under(&s->paths, "y"), 0);
	assert_string_equal(pathindex_file_at(&s->paths, "y"), "file/a");
	/* removing a file frees its path for another in the same push */
	must_apply(s, "{\"version\":6,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/d\",\"body\":" FILEAT("y") "}],"
		      "\"removed\":[\"file/a\"]}");
	assert_string_equal(pathindex_file_at(&s->paths, "y"), "file/d");
	check_invariants(s);
	/* a path moved out from under a directory lets a file take it */
	must_apply(s, "{\"version\":7,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/e\",\"body\":" FILEAT("w/1") "}]}");
	must_apply(s, "{\"version\":8,\"nonce\":\"n\",\"upserts\":[{\"name\":\"file/e\",\"body\":" FILEAT("v/1") "},"
		      "{\"name\":\"file/f\",\"body\":" FILEAT("w") "}]}");
	assert_string_equal(pathindex_file_at(&s->paths, "w"), "file/f");
	check_invariants(s);
}

static void test_state_get_raw_bytes_count(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	size_t before = s->raw_bytes;
	const struct res *a = state_get(s, "cluster/a");
	size_t alen = a->body_len;
	/* a longer body for a: raw_bytes grows by the difference */
	must_apply(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/a\",\"body\":"
		      "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80},{\"address\":\"10.0.0.2\",\"port\":80}]}}]}");
	a = state_get(s, "cluster/a");
	assert_int_equal(s->raw_bytes, before - alen + a->body_len);
	assert_int_equal(s->count, 4);
	/* adding one adds its name and body */
	before = s->raw_bytes;
	must_apply(s, "{\"version\":3,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/zz\",\"body\":" CL(5) "}]}");
	assert_int_equal(s->count, 5);
	assert_int_equal(s->raw_bytes, before + strlen("cluster/zz") + state_get(s, "cluster/zz")->body_len);
	/* removing takes them away */
	must_apply(s, "{\"version\":4,\"nonce\":\"n\",\"removed\":[\"cluster/zz\"]}");
	assert_int_equal(s->count, 4);
	assert_int_equal(s->raw_bytes, before);
	assert_null(state_get(s, "cluster/zz"));
	check_invariants(s);
}

static void test_candidate_release_frees(void **state)
{
	struct state *s = *state;
	must_apply(s, BASE_PUSH);
	struct candidate c;
	char err[512];
	assert_int_equal(build(s, "{\"version\":2,\"nonce\":\"n\",\"upserts\":[{\"name\":\"cluster/c\",\"body\":" CL(1) "},"
			       "{\"name\":\"route/r\",\"body\":" RT("l", "c") "},{\"name\":\"file/f\",\"body\":" FILEAT("a/b")
			       "}],\"removed\":[\"cluster/b\"]}", 0, &c, err, sizeof(err)), 0);
	assert_int_equal(c.n, 4);
	candidate_release(&c);
	assert_int_equal(c.n, 0);
	assert_null(c.items);
	candidate_release(&c);   /* twice is harmless */
	/* the state is as it was */
	assert_int_equal(s->version, 1);
	assert_int_equal(s->count, 4);
	assert_null(state_get(s, "file/f"));
	assert_null(pathindex_file_at(&s->paths, "a/b"));
	check_invariants(s);
}

static void test_res_new(void **state)
{
	(void)state;
	char err[512];
	const char *body = "{\"cluster\":\"a\",\"listener\":\"l\"}";
	struct res *r = res_new("route/r", strdup(body), strlen(body), 42, err, sizeof(err));
	assert_non_null(r);
	assert_string_equal(r->name, "route/r");
	assert_string_equal(r->body, body);
	assert_int_equal(r->version, 42);
	assert_int_equal(r->nrefs, 2);
	assert_int_equal(r->referrers, 0);
	res_free(r);
	const char *f = "{\"content\":\"x\",\"path\":\"etc/a.conf\"}";
	r = res_new("file/f", strdup(f), strlen(f), 1, err, sizeof(err));
	assert_non_null(r);
	assert_string_equal(r->file_path, "etc/a.conf");
	res_free(r);
	/* a body that does not validate (res_new takes it either way) */
	const char *bad = "{\"port\":0}";
	assert_null(res_new("listener/l", strdup(bad), strlen(bad), 1, err, sizeof(err)));
	assert_string_equal(err, "listener/l: port must be an integer in 1..65535");
	assert_null(res_new("listener/l", strdup("{"), 1, 1, err, sizeof(err)));
	assert_non_null(strstr(err, "listener/l: malformed JSON"));
	res_free(NULL);
}

/* ---- random pushes against a model ---------------------------------------------- */

static uint64_t rng_state;

static uint64_t rng_next(void)
{
	uint64_t z = (rng_state += 0x9e3779b97f4a7c15ULL);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static size_t rng_below(size_t n)
{
	return (size_t)(rng_next() % n);
}

#define NSLOTS 16
static const char *const slot_names[NSLOTS] = {
	"secret/s0", "secret/s1", "cluster/c0", "cluster/c1", "cluster/c2", "listener/l0", "listener/l1",
	"route/r0", "route/r1", "route/r2", "route/r3", "file/f0", "file/f1", "file/f2", "file/f3", "file/f4",
};
static const char *const file_paths[] = { "a", "a/b", "a/c", "b", "x/y/z", "x/y", "x/w", "c/d/e" };

struct model_res {
	bool live;
	int variant;           /* which body */
	char refs[2][64];      /* the names it refers to */
	int nrefs;
	const char *path;
};

/* Writes slot i's body for variant v into b and fills m. */
static void make_body(size_t i, int v, struct buf *b, struct model_res *m)
{
	const char *name = slot_names[i];
	m->nrefs = 0;
	m->path = NULL;
	m->variant = v;
	if (strncmp(name, "secret/", 7) == 0) {
		buf_printf(b, "{\"cert\":\"-----BEGIN %d\",\"key\":\"-----BEGIN K\"}", v);
	} else if (strncmp(name, "cluster/", 8) == 0) {
		buf_printf(b, "{\"endpoints\":[{\"address\":\"10.0.0.%d\",\"port\":80}]}", v % 3);
	} else if (strncmp(name, "listener/", 9) == 0) {
		if (v % 3 == 0) {
			buf_printf(b, "{\"port\":%d}", 8000 + v % 2);
		} else {
			int sec = v % 2;
			buf_printf(b, "{\"port\":443,\"tls\":{\"secret\":\"s%d\"}}", sec);
			snprintf(m->refs[m->nrefs++], sizeof(m->refs[0]), "secret/s%d", sec);
		}
	} else if (strncmp(name, "route/", 6) == 0) {
		int l = v % 2, c = (v / 2) % 3;
		buf_printf(b, "{\"listener\":\"l%d\",\"cluster\":\"c%d\"}", l, c);
		snprintf(m->refs[m->nrefs++], sizeof(m->refs[0]), "listener/l%d", l);
		snprintf(m->refs[m->nrefs++], sizeof(m->refs[0]), "cluster/c%d", c);
	} else {
		m->path = file_paths[v % (int)(sizeof(file_paths) / sizeof(file_paths[0]))];
		buf_printf(b, "{\"path\":\"%s\",\"content\":\"v%d\"}", m->path, v / 8);
	}
}

static bool path_under(const char *path, const char *dir)
{
	size_t n = strlen(dir);
	return strncmp(path, dir, n) == 0 && path[n] == '/';
}

/* Is the model state valid: references resolve, no path conflicts? */
static bool model_valid(const struct model_res *m)
{
	for (size_t i = 0; i < NSLOTS; i++) {
		if (!m[i].live)
			continue;
		for (int k = 0; k < m[i].nrefs; k++) {
			bool found = false;
			for (size_t j = 0; j < NSLOTS; j++)
				if (m[j].live && strcmp(slot_names[j], m[i].refs[k]) == 0)
					found = true;
			if (!found)
				return false;
		}
		if (!m[i].path)
			continue;
		for (size_t j = 0; j < NSLOTS; j++) {
			if (j == i || !m[j].live || !m[j].path)
				continue;
			if (strcmp(m[i].path, m[j].path) == 0 || path_under(m[i].path, m[j].path))
				return false;
		}
	}
	return true;
}

static void test_random_pushes_match_model(void **state)
{
	struct state *s = *state;
	struct model_res model[NSLOTS];
	memset(model, 0, sizeof(model));
	int accepted = 0, refused = 0;
	for (int round = 0; round < 2000; round++) {
		struct model_res next[NSLOTS];
		memcpy(next, model, sizeof(next));
		bool full = rng_below(10) == 0;
		struct buf b = BUF_INIT, rm = BUF_INIT;
		buf_printf(&b, "{\"version\":%d,\"nonce\":\"r\",\"full\":%s,\"upserts\":[", round + 1,
			   full ? "true" : "false");
		bool first = true, first_rm = true, changed = false;
		/* visit the slots in a random order: the push order must not matter */
		size_t order[NSLOTS];
		for (size_t i = 0; i < NSLOTS; i++)
			order[i] = i;
		for (size_t i = NSLOTS - 1; i > 0; i--) {
			size_t j = rng_below(i + 1), t = order[i];
			order[i] = order[j];
			order[j] = t;
		}
		for (size_t k = 0; k < NSLOTS; k++) {
			size_t i = order[k];
			size_t what = rng_below(full ? 3 : 6);
			if (full) {
				/* a snapshot lists what stays; 0: drop it */
				if (what == 0 || (!model[i].live && what == 1)) {
					next[i].live = false;
					continue;
				}
				int v = what == 1 && model[i].live ? model[i].variant : (int)rng_below(24);
				buf_puts(&b, first ? "" : ",");
				first = false;
				buf_printf(&b, "{\"name\":\"%s\",\"body\":", slot_names[i]);
				make_body(i, v, &b, &next[i]);
				buf_putc(&b, '}');
				next[i].live = true;
			} else if (what == 0) {
				int v = (int)rng_below(24);
				buf_puts(&b, first ? "" : ",");
				first = false;
				buf_printf(&b, "{\"name\":\"%s\",\"body\":", slot_names[i]);
				make_body(i, v, &b, &next[i]);
				buf_putc(&b, '}');
				next[i].live = true;
			} else if (what == 1) {
				buf_printf(&rm, "%s\"%s\"", first_rm ? "" : ",", slot_names[i]);
				first_rm = false;
				next[i].live = false;
			}
		}
		buf_puts(&b, "]");
		if (!full)
			buf_printf(&b, ",\"removed\":[%s]", rm.data ? rm.data : "");
		buf_puts(&b, "}");
		for (size_t i = 0; i < NSLOTS; i++)
			if (next[i].live != model[i].live || (next[i].live && next[i].variant != model[i].variant))
				changed = true;
		bool want = model_valid(next);
		char err[512];
		struct candidate c;
		int rc = build(s, b.data, 0, &c, err, sizeof(err));
		if ((rc == 0) != want)
			fail_msg("round %d: candidate_build %s (%s), the model says %s\n%s", round,
				 rc == 0 ? "accepted" : "refused", err, want ? "valid" : "invalid", b.data);
		if (rc == 0) {
			/* no change at all makes an empty candidate */
			if (!changed)
				assert_int_equal(c.n, 0);
			state_commit(s, &c);
			candidate_release(&c);
			memcpy(model, next, sizeof(model));
			accepted++;
		} else {
			refused++;
		}
		buf_release(&b);
		buf_release(&rm);
		check_invariants(s);
		/* the state holds exactly the model's live resources */
		size_t live = 0;
		for (size_t i = 0; i < NSLOTS; i++) {
			const struct res *r = state_get(s, slot_names[i]);
			assert_true((r != NULL) == model[i].live);
			live += model[i].live;
			if (r && model[i].path)
				assert_string_equal(r->file_path, model[i].path);
		}
		assert_int_equal(s->count, live);
	}
	/* both outcomes happened often enough to mean something */
	assert_true(accepted > 200);
	assert_true(refused > 200);
}

int main(void)
{
	const char *env = getenv("STATE_TEST_SEED");
	uint64_t seed = 0;
	if (env) {
		char *end;
		errno = 0;
		seed = strtoull(env, &end, 10);
		if (errno || end == env || *end) {
			fprintf(stderr, "STATE_TEST_SEED must be a number\n");
			return 99;
		}
	} else {
		seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
	}
	rng_state = seed;
	printf("# random push seed: %llu (set STATE_TEST_SEED to repeat)\n", (unsigned long long)seed);
	fflush(stdout);

	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_empty_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_into_empty_state, setup, teardown),
		cmocka_unit_test_setup_teardown(test_delta_applied, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unchanged_bodies_dropped, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshot_removals, setup, teardown),
		cmocka_unit_test_setup_teardown(test_route_before_its_cluster, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unknown_references, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_referenced_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_referrer_and_referenced_together, setup, teardown),
		cmocka_unit_test_setup_teardown(test_referrers_after_commits_in_any_order, setup, teardown),
		cmocka_unit_test_setup_teardown(test_strict_mode, setup, teardown),
		cmocka_unit_test_setup_teardown(test_named_twice, setup, teardown),
		cmocka_unit_test_setup_teardown(test_remove_absent_is_no_change, setup, teardown),
		cmocka_unit_test_setup_teardown(test_files_same_path_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_file_under_file_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_moving_a_files_path, setup, teardown),
		cmocka_unit_test_setup_teardown(test_state_get_raw_bytes_count, setup, teardown),
		cmocka_unit_test_setup_teardown(test_candidate_release_frees, setup, teardown),
		cmocka_unit_test_setup_teardown(test_res_new, setup, teardown),
		cmocka_unit_test_setup_teardown(test_random_pushes_match_model, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
