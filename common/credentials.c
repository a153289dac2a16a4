/* credentials.c: TLS options and bearer tokens for clients of the plane
 * (see credentials.h). */
#include "credentials.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct curl_slist *credentials_apply(CURL *h, const struct credentials *cr, struct curl_slist *headers)
{
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
	if (cr->ca_file)
		curl_easy_setopt(h, CURLOPT_CAINFO, cr->ca_file);
	if (cr->cert)
		curl_easy_setopt(h, CURLOPT_SSLCERT, cr->cert);
	if (cr->key)
		curl_easy_setopt(h, CURLOPT_SSLKEY, cr->key);
	if (cr->token) {
		char *line = xasprintf("Authorization: Bearer %s", cr->token);
		headers = curl_slist_append(headers, line);   /* copies it */
		memset(line, 0, strlen(line));
		free(line);
	}
	return headers;
}

void credentials_free_headers(struct curl_slist *headers)
{
	for (struct curl_slist *h = headers; h; h = h->next)
		if (h->data)
			explicit_bzero(h->data, strlen(h->data));
	curl_slist_free_all(headers);
}

void credentials_forget(char *token)
{
	if (!token)
		return;
	memset(token, 0, strlen(token));
	free(token);
}

char *credentials_read_token(const char *path, char *err, size_t errlen)
{
	size_t len;
	char *tok = read_secret_file(path, TOKEN_MAX, &len);
	if (!tok) {
		if (errno == EFBIG)
			snprintf(err, errlen, "token file '%s' is larger than %d bytes", path, TOKEN_MAX);
		else
			snprintf(err, errlen, "cannot read token file '%s': %s", path, strerror(errno));
		return NULL;
	}
	if (strlen(tok) != len) {
		snprintf(err, errlen, "token file '%s' holds a NUL byte", path);
		goto fail;
	}
	str_trim(tok);
	if (!*tok) {
		snprintf(err, errlen, "token file '%s' is empty", path);
		goto fail;
	}
	for (const unsigned char *p = (const unsigned char *)tok; *p; p++) {
		/* a header line cannot carry control characters */
		if (*p < 0x20 || *p == 0x7f) {
			snprintf(err, errlen, "token file '%s' holds a control character", path);
			goto fail;
		}
	}
	return tok;
fail:
	memset(tok, 0, len);
	free(tok);
	return NULL;
}
