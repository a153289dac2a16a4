/* gz.c: gzip helpers over zlib (see gz.h). */
#include "gz.h"

#include <string.h>
#include <zlib.h>

static int deflate_all(z_stream *zs, const void *data, size_t len, int flush, struct buf *out)
{
	zs->next_in = (Bytef *)(uintptr_t)data;
	zs->avail_in = (uInt)len;
	int rc;
	do {
		buf_reserve(out, 16384);
		zs->next_out = (Bytef *)out->data + out->len;
		zs->avail_out = (uInt)(out->cap - out->len - 1);
		size_t before = zs->avail_out;
		rc = deflate(zs, flush);
		if (rc == Z_STREAM_ERROR)
			return -1;
		out->len += before - zs->avail_out;
		out->data[out->len] = '\0';
	} while (zs->avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
	return 0;
}

int gz_compress(const void *data, size_t len, struct buf *out)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	if (len > UINT32_MAX || deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	int rc = deflate_all(&zs, data, len, Z_FINISH, out);
	deflateEnd(&zs);
	return rc;
}

int gz_decompress(const void *data, size_t len, size_t max, struct buf *out)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	if (len > UINT32_MAX || inflateInit2(&zs, 15 + 32) != Z_OK)
		return -1;
	zs.next_in = (Bytef *)(uintptr_t)data;
	zs.avail_in = (uInt)len;
	size_t start = out->len;
	int rc;
	do {
		buf_reserve(out, 16384);
		zs.next_out = (Bytef *)out->data + out->len;
		zs.avail_out = (uInt)(out->cap - out->len - 1);
		size_t before = zs.avail_out;
		rc = inflate(&zs, Z_NO_FLUSH);
		out->len += before - zs.avail_out;
		out->data[out->len] = '\0';
		if (out->len - start > max || (rc != Z_OK && rc != Z_STREAM_END)) {
			inflateEnd(&zs);
			return -1;
		}
	} while (rc != Z_STREAM_END && (zs.avail_in > 0 || zs.avail_out == 0));
	inflateEnd(&zs);
	return rc == Z_STREAM_END ? 0 : -1;
}

void gz_stream_header(struct buf *out)
{
	static const unsigned char hdr[10] = { 0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3 };
	buf_append(out, hdr, sizeof(hdr));
}

int gz_stream_fragment(const void *data, size_t len, struct buf *out)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	if (len > UINT32_MAX || deflateInit2(&zs, 6, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
		return -1;
	int rc = deflate_all(&zs, data, len, Z_SYNC_FLUSH, out);
	deflateEnd(&zs);
	return rc;
}

void gz_stream_stored(const void *data, size_t len, struct buf *out)
{
	const unsigned char *p = data;
	do {
		size_t n = len > 65535 ? 65535 : len;
		unsigned char hdr[5] = { 0, (unsigned char)(n & 0xff), (unsigned char)(n >> 8),
					 (unsigned char)(~n & 0xff), (unsigned char)((~n >> 8) & 0xff) };
		buf_append(out, hdr, sizeof(hdr));
		buf_append(out, p, n);
		p += n;
		len -= n;
	} while (len > 0);
}

void gz_stream_trailer(uint32_t crc, uint32_t isize, struct buf *out)
{
	unsigned char t[13] = { 1, 0, 0, 0xff, 0xff };
	for (int i = 0; i < 4; i++) {
		t[5 + i] = (unsigned char)(crc >> (8 * i));
		t[9 + i] = (unsigned char)(isize >> (8 * i));
	}
	buf_append(out, t, sizeof(t));
}

uint32_t gz_crc32(uint32_t crc, const void *data, size_t len)
{
	return (uint32_t)crc32(crc, data, (uInt)len);
}

uint32_t gz_crc32_combine(uint32_t crc1, uint32_t crc2, size_t len2)
{
	return (uint32_t)crc32_combine(crc1, crc2, (z_off_t)len2);
}
