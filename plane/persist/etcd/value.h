/* persist/etcd/value.h: a resource's etcd value: "L VERSION\nBODY" (live) or
 * "T VERSION DELETED_AT\n" (a tombstone), and the decimal keys (version,
 * horizon). */
#ifndef TETHER_ETCD_VALUE_H
#define TETHER_ETCD_VALUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* 0, or -1 when malformed (version 0 included). *body points into value
 * (NULL for a tombstone), *body_len its length. */
int etcd_value_parse(const char *value, size_t len, uint64_t *version, int64_t *deleted_at, const char **body,
		     size_t *body_len);
/* The value of a resource (body non-NULL) or tombstone; new allocated. */
char *etcd_value_format(const char *body, size_t body_len, uint64_t version, int64_t deleted_at, size_t *len);
/* A decimal of len bytes (no sign, no space, no leading zero). */
bool etcd_value_dec(const char *s, size_t len, uint64_t *out);

#endif
