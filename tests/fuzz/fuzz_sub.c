/* fuzz_sub.c: libFuzzer target for sub_parse and sub_match (the ?sub= of a
 * stream or poll): nothing crashes, a refusal has a message, and an accepted
 * subscription has sorted non-empty prefixes, canon is exactly them joined
 * by commas, and sub_match agrees with a plain prefix test (guard/ names
 * belong to every subscription). */
#include "fuzz.h"
#include "core/delta.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void die(const char *what, const char *input, const char *detail)
{
	fprintf(stderr, "fuzz_sub: %s\n  input: %.256s\n  detail: %.256s\n", what, input,
		detail ? detail : "");
	abort();
}

static bool ref_match(const struct sub *s, const char *name)
{
	if (s->n == 0 || strncmp(name, "guard/", 6) == 0)   /* guards belong to every subscription */
		return true;
	for (size_t i = 0; i < s->n; i++) {
		size_t pl = strlen(s->prefix[i]);
		if (strlen(name) >= pl && memcmp(name, s->prefix[i], pl) == 0)
			return true;
	}
	return false;
}

static void check_match(const struct sub *s, const char *input, const char *name)
{
	if (sub_match(s, name) != ref_match(s, name))
		die("sub_match disagrees with a prefix test", input, name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {
		"", "cluster/web", "cluster/", "route/web-1", "listener/a", "secret/tls",
		"file/x", "c", "cluster/web-canary", "guard/shrink", "guard",
	};
	char *s = malloc(size + 1);
	if (!s)
		abort();
	if (size)
		memcpy(s, data, size);
	s[size] = '\0';

	struct sub sub;
	char err[256] = "";
	if (sub_parse(s, &sub, err, sizeof(err)) < 0) {
		if (!err[0])
			die("sub_parse failed without a message", s, NULL);
		free(s);
		return 0;
	}
	if (!sub.canon)
		die("accepted subscription without canon", s, NULL);

	size_t canon_len = 0;
	for (size_t i = 0; i < sub.n; i++) {
		const char *p = sub.prefix[i];
		size_t pl = strlen(p);
		if (pl == 0 || pl > RES_FULLNAME_MAX)
			die("prefix length out of range", s, p);
		if (strchr(p, ','))
			die("prefix holds a comma", s, p);
		if (i > 0 && strcmp(sub.prefix[i - 1], p) >= 0)
			die("prefixes not strictly sorted", s, p);
		if (i > 0 && strncmp(p, sub.prefix[i - 1], strlen(sub.prefix[i - 1])) == 0)
			die("a prefix covered by another was kept", s, p);
		/* sub_match is O(prefixes): test a few, or the harness goes quadratic */
		bool probe = i < 8 || i + 8 >= sub.n;
		if (probe && !sub_match(&sub, p))
			die("sub_match refuses its own prefix", s, p);
		/* the canon is the prefixes joined by commas */
		if (i > 0) {
			if (sub.canon[canon_len] != ',')
				die("canon is not the prefixes joined by commas", s, sub.canon);
			canon_len++;
		}
		if (strncmp(sub.canon + canon_len, p, pl) != 0)
			die("canon is not the prefixes joined by commas", s, sub.canon);
		canon_len += pl;
	}
	if (strlen(sub.canon) != canon_len)
		die("canon longer than the prefixes joined", s, sub.canon);
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		check_match(&sub, s, names[i]);
	/* the input itself, used as a name */
	check_match(&sub, s, s);

	/* parsing the canon gives the same subscription */
	struct sub again;
	err[0] = '\0';
	if (sub_parse(sub.canon, &again, err, sizeof(err)) < 0)
		die("canon does not parse", s, err);
	if (again.n != sub.n || strcmp(again.canon, sub.canon) != 0)
		die("canon parses to another subscription", s, again.canon);
	sub_release(&again);

	sub_release(&sub);
	if (sub.n != 0 || sub.prefix || sub.canon)
		die("sub_release left pointers behind", s, NULL);
	free(s);
	return 0;
}
