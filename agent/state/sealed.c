/* state/sealed.c: telling a sealed secret, and wiping an opened one's
 * parsed body (see state/sealed.h). */
#include "state/sealed.h"
#include "resource.h"

#include <sodium.h>
#include <string.h>

bool sealed_is(const struct res *r)
{
	/* the body is canonical JSON: a sealed one has the one member */
	static const char head[] = "{\"sealed\":";
	return resource_type_of(r->name) == RES_SECRET && r->body_len > sizeof(head) - 1 &&
	       memcmp(r->body, head, sizeof(head) - 1) == 0;
}

static void wipe(cJSON *v)
{
	for (; v; v = v->next) {
		if (v->valuestring)
			sodium_memzero(v->valuestring, strlen(v->valuestring));
		if (v->string)
			sodium_memzero(v->string, strlen(v->string));
		wipe(v->child);
	}
}

void sealed_body_free(cJSON *v)
{
	if (!v)
		return;
	wipe(v->child);
	if (v->valuestring)
		sodium_memzero(v->valuestring, strlen(v->valuestring));
	cJSON_Delete(v);
}
