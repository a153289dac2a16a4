/* gz.h: gzip with zlib: whole buffers, and the pieces of a gzip stream
 * that is written one event at a time without a zlib state per stream:
 * each event is an independent raw-deflate fragment ending in a sync flush
 * (byte-aligned, not final), so fragments compressed once can be shared by
 * every stream and simply concatenated; per-stream bytes go in stored
 * blocks; the stream ends with an empty final block and the CRC/size. */
#ifndef TETHER_GZ_H
#define TETHER_GZ_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

/* Appends data gzip-compressed (a whole gzip member). Returns 0 or -1. */
int gz_compress(const void *data, size_t len, struct buf *out);
/* Appends the inflated form of a gzip member, refusing output over max. */
int gz_decompress(const void *data, size_t len, size_t max, struct buf *out);

/* Streaming pieces. */
void gz_stream_header(struct buf *out);
/* A raw deflate fragment of data, sync-flushed, not final. */
int gz_stream_fragment(const void *data, size_t len, struct buf *out);
/* data as stored (uncompressed) blocks. */
void gz_stream_stored(const void *data, size_t len, struct buf *out);
/* The empty final block and the trailer for the whole stream's CRC-32 and
 * length (mod 2^32) of the uncompressed bytes. */
void gz_stream_trailer(uint32_t crc, uint32_t isize, struct buf *out);
uint32_t gz_crc32(uint32_t crc, const void *data, size_t len);
uint32_t gz_crc32_combine(uint32_t crc1, uint32_t crc2, size_t len2);

#endif
