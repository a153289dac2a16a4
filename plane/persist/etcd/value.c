/* persist/etcd/value.c: how a resource lives in an etcd value (see persist/etcd/value.h):
 * the parser of what etcd hands back, which another replica, an older or
 * newer plane or a damaged key may have written. */
#include "persist/etcd/value.h"
#include "buf.h"
#include "util.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

int etcd_value_parse(const char *value, size_t len, uint64_t *version, int64_t *deleted_at, const char **body,
		     size_t *body_len)
{
	const char *nl = memchr(value, '\n', len);
	if (!nl || len < 3 || (value[0] != 'L' && value[0] != 'T') || value[1] != ' ')
		return -1;
	/* strict decimals: no sign, no space, no leading junk (sscanf would
	 * take " -5" for a huge number) */
	const char *num = value + 2, *end = nl;
	const char *sp = value[0] == 'T' ? memchr(num, ' ', (size_t)(end - num)) : NULL;
	uint64_t v = 0, d = 0;
	if (value[0] == 'T' && !sp)
		return -1;
	if (!etcd_value_dec(num, (size_t)((sp ? sp : end) - num), &v) || v == 0)
		return -1;
	if (value[0] == 'L') {
		*body = nl + 1;
		*body_len = len - (size_t)(nl + 1 - value);
		*deleted_at = 0;
	} else {
		if (!etcd_value_dec(sp + 1, (size_t)(end - sp - 1), &d) || d > (uint64_t)INT64_MAX ||
		    nl + 1 != value + len)
			return -1;
		*body = NULL;
		*body_len = 0;
		*deleted_at = (int64_t)d;
	}
	*version = v;
	return 0;
}

char *etcd_value_format(const char *body, size_t body_len, uint64_t version, int64_t deleted_at, size_t *len)
{
	struct buf b = BUF_INIT;
	if (body) {
		buf_printf(&b, "L %llu\n", (unsigned long long)version);
		buf_append(&b, body, body_len);
	} else {
		buf_printf(&b, "T %llu %lld\n", (unsigned long long)version, (long long)deleted_at);
	}
	return buf_detach(&b, len);
}

bool etcd_value_dec(const char *s, size_t len, uint64_t *out)
{
	/* one spelling per number: no leading zero (what we write) */
	if (len == 0 || len > 20 || (len > 1 && s[0] == '0'))
		return false;
	uint64_t v = 0;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return false;
		unsigned d = (unsigned)(s[i] - '0');
		if (v > (UINT64_MAX - d) / 10)
			return false;
		v = v * 10 + d;
	}
	*out = v;
	return true;
}
