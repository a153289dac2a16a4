/* consumer/procfs.c: parsers of /proc/PID/stat, status and cmdline text
 * (see consumer/procfs.h). */
#include "consumer/procfs.h"

#include <stdbool.h>
#include <string.h>

/* A decimal number of at most 20 digits starting at *p (before end), not
 * above max; *p moves past it. 0, or -1. */
static int number(const char **p, const char *end, uint64_t max, uint64_t *out)
{
	const char *s = *p;
	uint64_t v = 0;
	if (s >= end || *s < '0' || *s > '9')
		return -1;
	for (; s < end && *s >= '0' && *s <= '9'; s++) {
		unsigned d = (unsigned)(*s - '0');
		if (v > (max - d) / 10)
			return -1;
		v = v * 10 + d;
	}
	*p = s;
	*out = v;
	return 0;
}

/* Moves *p past one field and the single space after it (the kernel
 * separates fields by one space). 0, or -1 at the end of the text. */
static int skip_field(const char **p, const char *end)
{
	const char *s = *p;
	if (s >= end || *s == ' ')
		return -1;
	while (s < end && *s != ' ')
		s++;
	if (s >= end)
		return -1;
	*p = s + 1;
	return 0;
}

int procfs_parse_stat(const char *text, size_t len, struct procfs_stat *out)
{
	const char *p = text, *end = text + len;
	const char *open = memchr(text, '(', len);
	const char *close = NULL;
	for (const char *s = end; s > text; s--)
		if (s[-1] == ')') {
			close = s - 1;
			break;
		}
	memset(out, 0, sizeof(*out));
	if (!open || !close || close < open)
		return -1;
	uint64_t v;
	if (number(&p, open, 4194304, &v) < 0 || v == 0 || p + 1 != open || *p != ' ')
		return -1;
	out->pid = (long)v;
	size_t n = (size_t)(close - open - 1);
	if (n >= sizeof(out->comm))
		n = sizeof(out->comm) - 1;
	memcpy(out->comm, open + 1, n);
	out->comm[n] = '\0';
	p = close + 1;
	/* " S PPID": field 3, then field 4 */
	if (end - p < 4 || p[0] != ' ' || p[1] == ' ' || p[2] != ' ')
		return -1;
	out->state = p[1];
	p += 3;
	if (number(&p, end, 4194304, &v) < 0 || (p < end && *p != ' '))
		return -1;
	out->ppid = (long)v;
	if (p >= end)
		return -1;
	p++;
	/* fields 5 to 21 (some may be negative: skipped whole), then 22 */
	for (int f = 5; f < 22; f++)
		if (skip_field(&p, end) < 0)
			return -1;
	if (number(&p, end, UINT64_MAX, &out->start) < 0 || (p < end && *p != ' ' && *p != '\n'))
		return -1;
	return 0;
}

int procfs_parse_rss(const char *text, size_t len, uint64_t *bytes)
{
	static const char key[] = "VmRSS:";
	const char *end = text + len;
	for (const char *line = text; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *eol = nl ? nl : end;
		if ((size_t)(eol - line) > sizeof(key) - 1 && memcmp(line, key, sizeof(key) - 1) == 0) {
			const char *p = line + sizeof(key) - 1;
			while (p < eol && (*p == ' ' || *p == '\t'))
				p++;
			uint64_t kb;
			if (number(&p, eol, UINT64_MAX / 1024, &kb) < 0)
				return -1;
			if (eol - p != 3 || memcmp(p, " kB", 3) != 0)
				return -1;
			*bytes = kb * 1024;
			return 0;
		}
		line = eol + 1;
	}
	return -1;
}

void procfs_title(const char *raw, size_t len, char *out, size_t outlen)
{
	size_t n = 0;
	for (size_t i = 0; i < len && n + 1 < outlen; i++) {
		unsigned char c = (unsigned char)raw[i];
		out[n++] = c == '\0' ? ' ' : (c < 0x20 || c == 0x7f) ? '?' : (char)c;
	}
	while (n > 0 && out[n - 1] == ' ')
		n--;
	out[n] = '\0';
}
