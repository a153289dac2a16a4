/* credentials.h: how a client of the plane (tetherd, tetherctl) proves
 * who it is and checks who the plane is: the CA that signs the plane's
 * certificate, an optional client certificate and key (mutual TLS), and an
 * optional bearer token read from a file. One place applies them to a
 * libcurl handle, so the agent and the CLI cannot drift apart. */
#ifndef TETHER_CREDENTIALS_H
#define TETHER_CREDENTIALS_H

#include <curl/curl.h>
#include <stddef.h>

#define TOKEN_MAX 4096

struct credentials {
	const char *ca_file;    /* NULL: the system's trust store */
	const char *cert;       /* client certificate (PEM), or NULL */
	const char *key;        /* its private key (PEM), or NULL */
	const char *token;      /* bearer token, or NULL */
};

/* Sets the TLS options of cr on h and returns headers with the
 * Authorization header appended (when there is a token). Peer and host
 * verification stay on: there is no option to turn them off. */
struct curl_slist *credentials_apply(CURL *h, const struct credentials *cr, struct curl_slist *headers);

/* Frees a header list that may hold the Authorization line, wiped first. */
void credentials_free_headers(struct curl_slist *headers);

/* Reads a bearer token from path: trimmed, not empty, printable ASCII, at
 * most TOKEN_MAX bytes. Returns a new allocated string (free it with
 * credentials_forget), or NULL with a message in err. The token itself
 * never appears in a message. */
char *credentials_read_token(const char *path, char *err, size_t errlen);
/* Wipes and frees a token (NULL is fine). */
void credentials_forget(char *token);

#endif
