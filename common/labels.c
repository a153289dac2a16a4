/* labels.c: parsing of node label lists (see labels.h). */
#include "labels.h"

#include <stdbool.h>
#include <stdio.h>
#include <string.h>

static bool label_char(char c, bool key)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       c == '.' || c == '_' || c == '-' || (key && c == '/');
}

cJSON *labels_parse(const char *s, char *err, size_t errlen)
{
	cJSON *obj = cJSON_CreateObject();
	int count = 0;
	const char *p = s ? s : "";
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);
		const char *eq = memchr(p, '=', len);
		if (len == 0) {
			p += end ? 1 : 0;
			continue;
		}
		if (!eq) {
			snprintf(err, errlen, "label '%.*s' must be key=value", (int)(len > 64 ? 64 : len), p);
			goto fail;
		}
		size_t klen = (size_t)(eq - p), vlen = len - klen - 1;
		if (klen == 0 || klen > 63 || vlen > 63) {
			snprintf(err, errlen, "label '%.*s': keys are 1..63 bytes, values 0..63",
				 (int)(len > 64 ? 64 : len), p);
			goto fail;
		}
		for (size_t i = 0; i < klen; i++)
			if (!label_char(p[i], true)) {
				snprintf(err, errlen, "label key '%.*s' may hold only [A-Za-z0-9._/-]", (int)klen, p);
				goto fail;
			}
		for (size_t i = 0; i < vlen; i++)
			if (!label_char(eq[1 + i], false)) {
				snprintf(err, errlen, "label value '%.*s' may hold only [A-Za-z0-9._-]", (int)vlen, eq + 1);
				goto fail;
			}
		char key[64], val[64];
		memcpy(key, p, klen);
		key[klen] = '\0';
		memcpy(val, eq + 1, vlen);
		val[vlen] = '\0';
		if (cJSON_GetObjectItemCaseSensitive(obj, key)) {
			snprintf(err, errlen, "label '%s' given twice", key);
			goto fail;
		}
		if (++count > LABELS_MAX) {
			snprintf(err, errlen, "more than %d labels", LABELS_MAX);
			goto fail;
		}
		cJSON_AddStringToObject(obj, key, val);
		p += len + (end ? 1 : 0);
	}
	return obj;
fail:
	cJSON_Delete(obj);
	return NULL;
}
