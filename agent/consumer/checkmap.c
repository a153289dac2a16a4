/* consumer/checkmap.c: a checker's refusal mapped to the resource (see
 * consumer/checkmap.h). */
#include "consumer/checkmap.h"

#include "resource.h"
#include "snippet.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define HASH_HEX 16   /* render_add_secret: 8 bytes of the content's hash */

/* A secret file's name at p: NAME-HASH.EXT, NAME a resource name's
 * characters. Fills name and ext; false when p holds no such name. */
static bool secret_file(const char *p, char *name, size_t ncap, char *ext, size_t ecap)
{
	size_t n = strspn(p, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.");
	const char *dot = NULL;
	for (size_t i = n; i > 0; i--)
		if (p[i - 1] == '.') {
			dot = p + i - 1;
			break;
		}
	if (!dot || (size_t)(dot - p) < HASH_HEX + 2 || dot[-HASH_HEX - 1] != '-')
		return false;
	for (const char *h = dot - HASH_HEX; h < dot; h++)
		if (!strchr("0123456789abcdef", *h))
			return false;
	size_t nlen = (size_t)(dot - p) - HASH_HEX - 1, elen = n - (size_t)(dot - p) - 1;
	if (nlen == 0 || nlen >= ncap || elen == 0 || elen >= ecap)
		return false;
	memcpy(name, p, nlen);
	name[nlen] = '\0';
	memcpy(ext, dot + 1, elen);
	ext[elen] = '\0';
	return true;
}

/* Whether p, a match of a directory in output, starts a path there (not
 * the tail of another one: "/x/var/lib/tether/secrets" is not ours). */
static bool path_start(const char *output, const char *p)
{
	return p == output || !strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./", p[-1]);
}

void checkmap_prefix(const char *output, const char *secrets_dir, char *out, size_t cap)
{
	size_t dlen = strlen(secrets_dir);
	if (cap)
		out[0] = '\0';
	if (!dlen)
		return;
	for (const char *p = strstr(output, secrets_dir); p; p = strstr(p + 1, secrets_dir)) {
		if (p[dlen] != '/' || !path_start(output, p))
			continue;
		char name[256], ext[8];
		if (!secret_file(p + dlen + 1, name, sizeof(name), ext, sizeof(ext)))
			continue;
		const char *field;
		if (strcmp(ext, "crt") == 0)
			field = "cert";
		else if (strcmp(ext, "key") == 0)
			field = "key";
		else if (strcmp(ext, "pem") == 0)
			field = strstr(output, "private key") || strstr(output, "PRIVATE KEY") ? "key" : "cert";
		else
			continue;
		snprintf(out, cap, "secret/%s: %s: ", name, field);
		return;
	}
}

bool checkmap_file_line(const char *output, const char *dir, char *file, size_t fcap, unsigned long *line)
{
	size_t dlen = strlen(dir);
	if (!dlen)
		return false;
	for (const char *p = strstr(output, dir); p; p = strstr(p + 1, dir)) {
		if (p[dlen] != '/' || !path_start(output, p))
			continue;
		const char *f = p + dlen + 1;
		size_t n = strcspn(f, ":/ \t\n\"'[]()");
		if (n == 0 || n >= fcap || f[n] != ':' || f[n + 1] < '0' || f[n + 1] > '9')
			continue;
		memcpy(file, f, n);
		file[n] = '\0';
		*line = strtoul(f + n + 1, NULL, 10);
		return *line > 0;
	}
	return false;
}

/* The resource line l (len n) names, as "TYPE/NAME" into out; false when none. */
static bool owner_of(const char *l, size_t n, char *out, size_t cap)
{
	while (n && (*l == ' ' || *l == '\t'))
		l++, n--;
	static const struct { const char *head, *type; } blocks[] = {
		{ "upstream tether_c_", "cluster" }, { "backend tether_c_", "cluster" },
		{ "frontend tether_l_", "listener" },
		{ "backend tether_r_", "route" },   /* a route's own backend (render_opts_haproxy.c) */
	};
	char name[256];
	for (size_t i = 0; i < sizeof(blocks) / sizeof(blocks[0]); i++) {
		size_t h = strlen(blocks[i].head);
		if (n > h && strncmp(l, blocks[i].head, h) == 0) {
			size_t k = strcspn(l + h, " {\n");
			if (k == 0 || k > n - h || k >= sizeof(name))
				return false;
			/* nginx's upstream name: '_' doubled, a capital as '_' and its small letter */
			size_t o = 0;
			bool nginx = blocks[i].head[0] == 'u';
			for (size_t j = h; j < h + k && o + 1 < sizeof(name); j++) {
				char c = l[j];
				if (nginx && c == '_' && j + 1 < h + k) {
					char d = l[++j];
					name[o++] = d == '_' ? '_' : (char)(d >= 'a' && d <= 'z' ? d - 'a' + 'A' : d);
				} else {
					name[o++] = c;
				}
			}
			name[o] = '\0';
			snprintf(out, cap, "%s/%s", blocks[i].type, name);
			return true;
		}
	}
	if (n < 3 || l[0] != '#' || l[1] != ' ')
		return false;
	size_t k = strcspn(l + 2, " ,\n");
	if (k > n - 2 || k >= sizeof(name))
		return false;
	memcpy(name, l + 2, k);
	name[k] = '\0';
	if (!strchr(name, '/') || resource_type_of(name) >= RES_TYPE_COUNT)
		return false;
	snprintf(out, cap, "%s", name);
	return true;
}

/* Whether line l (len n), naming no resource, starts a part of the file
 * that is none's: a comment at the start of a line (nginx's "# the agent
 * reads this ...") or a haproxy section ("backend tether_not_found"). */
static bool top_level_other(const char *l, size_t n)
{
	static const char *const heads[] = { "#", "backend ", "frontend ", "listen ", "global", "defaults" };
	for (size_t i = 0; i < sizeof(heads) / sizeof(heads[0]); i++) {
		size_t h = strlen(heads[i]);
		if (n >= h && strncmp(l, heads[i], h) == 0)
			return true;
	}
	return false;
}

/* A snippet's opening marker line (t, n bytes after its indent):
 * "#tether-snippet TYPE/NAME snippet.X" into out as "TYPE/NAME: snippet.X". */
static bool snippet_start(const char *t, size_t n, char *out, size_t cap)
{
	size_t m = strlen(SNIPPET_MARK);
	if (n <= m + 1 || strncmp(t, SNIPPET_MARK, m) != 0 || t[m] != ' ')
		return false;
	const char *r = t + m + 1;
	size_t rl = strcspn(r, " \n"), fl;
	if (rl > n - m - 1 || rl == 0 || r[rl] != ' ')
		return false;
	const char *f = r + rl + 1;
	fl = strcspn(f, " \n");
	if (fl == 0 || (size_t)(f + fl - t) > n || strncmp(f, "snippet.", 8) != 0 || rl >= 256 || fl >= 32)
		return false;
	char name[256];
	memcpy(name, r, rl);
	name[rl] = '\0';
	if (resource_type_of(name) >= RES_TYPE_COUNT)
		return false;
	snprintf(out, cap, "%s: %.*s", name, (int)fl, f);
	return true;
}

void checkmap_owner(const char *conf, unsigned long line, char *out, size_t cap)
{
	char owner[300] = "", o[300], snip[300] = "";
	unsigned long at = 1;
	const char *p = conf;
	bool location = false;   /* line is nginx's location: its route's comment follows */
	while (*p && at <= line + (location ? 1 : 0)) {
		const char *nl = strchr(p, '\n');
		size_t n = nl ? (size_t)(nl - p) : strlen(p);
		const char *t = p + strspn(p, " \t");
		size_t tn = n - (size_t)(t - p);
		if (at == line)
			location = strncmp(t, "location ", 9) == 0;
		/* a snippet's lines are its resource's, whatever they say */
		if (snip[0]) {
			size_t m = strlen(SNIPPET_MARK_END);
			if (tn >= m && strncmp(t, SNIPPET_MARK_END, m) == 0)
				snip[0] = '\0';
			else if (at == line)
				snprintf(owner, sizeof(owner), "%s", snip);
		} else if (at <= line && snippet_start(t, tn, snip, sizeof(snip))) {
			if (at == line)
				snprintf(owner, sizeof(owner), "%s", snip);
		} else if (owner_of(p, n, o, sizeof(o))) {
			if (at <= line || *t == '#')
				snprintf(owner, sizeof(owner), "%s", o);
		} else if (at <= line && top_level_other(p, n)) {
			owner[0] = '\0';   /* tether's own part (the marker, a fallback backend): no resource's */
		}
		if (!nl)
			break;
		p = nl + 1;
		at++;
	}
	if (cap)
		snprintf(out, cap, "%s%s", owner, owner[0] ? ": " : "");
}
