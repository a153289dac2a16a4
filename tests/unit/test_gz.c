/* test_gz.c: unit tests of common/gz.c: whole-buffer gzip round trips and the
 * bomb limit, and a gzip stream assembled from shared fragments. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "buf.h"
#include "gz.h"

/* Deterministic text-like bytes (compressible but not trivially). */
static void fill(char *p, size_t n, uint32_t seed)
{
	static const char words[][8] = { "server ", "listen ", "proxy ", "{ ", "} ", ";\n", "80 ", "web-" };
	size_t i = 0;
	while (i < n) {
		seed = seed * 1103515245u + 12345u;
		const char *w = words[(seed >> 16) % 8];
		for (size_t k = 0; w[k] && i < n; k++)
			p[i++] = w[k];
		if (i < n)
			p[i++] = (char)('a' + (seed >> 24) % 26);
	}
}

/* Inflates with zlib directly; windowBits as given. Returns Z_STREAM_END, Z_OK
 * (input used up before the end) or the error. */
static int inflate_all(const void *in, size_t len, int wbits, struct buf *out)
{
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	assert_int_equal(inflateInit2(&zs, wbits), Z_OK);
	zs.next_in = (Bytef *)(uintptr_t)in;
	zs.avail_in = (uInt)len;
	int rc;
	do {
		buf_reserve(out, 65536);
		zs.next_out = (Bytef *)out->data + out->len;
		zs.avail_out = (uInt)(out->cap - out->len - 1);
		uInt before = zs.avail_out;
		rc = inflate(&zs, Z_NO_FLUSH);
		out->len += before - zs.avail_out;
		out->data[out->len] = '\0';
	} while (rc == Z_OK && (zs.avail_in > 0 || zs.avail_out == 0));
	/* a gzip member must be wholly used */
	if (rc == Z_STREAM_END && zs.avail_in != 0)
		rc = Z_DATA_ERROR;
	inflateEnd(&zs);
	return rc;
}

static void test_round_trip(void **state)
{
	(void)state;
	static const size_t sizes[] = { 0, 1, 100, 65535, 65536, 300000 };
	for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
		size_t n = sizes[s];
		char *data = malloc(n ? n : 1);
		assert_non_null(data);
		fill(data, n, (uint32_t)s);
		struct buf gz = BUF_INIT, out = BUF_INIT;
		assert_int_equal(gz_compress(data, n, &gz), 0);
		assert_true(gz.len >= 18);
		assert_int_equal((unsigned char)gz.data[0], 0x1f);
		assert_int_equal((unsigned char)gz.data[1], 0x8b);
		if (n >= 65536)
			assert_true(gz.len < n / 2);   /* it did compress */
		assert_int_equal(gz_decompress(gz.data, gz.len, n, &out), 0);
		assert_int_equal(out.len, n);
		if (n)
			assert_memory_equal(out.data, data, n);
		/* zlib itself agrees */
		struct buf z = BUF_INIT;
		assert_int_equal(inflate_all(gz.data, gz.len, 15 + 16, &z), Z_STREAM_END);
		assert_int_equal(z.len, n);
		buf_release(&z);
		buf_release(&gz);
		buf_release(&out);
		free(data);
	}
}

static void test_compress_appends(void **state)
{
	(void)state;
	struct buf b = BUF_INIT, out = BUF_INIT;
	buf_puts(&b, "prefix");
	assert_int_equal(gz_compress("hello", 5, &b), 0);
	assert_memory_equal(b.data, "prefix", 6);
	buf_puts(&out, ">>");
	assert_int_equal(gz_decompress(b.data + 6, b.len - 6, 100, &out), 0);
	assert_string_equal(out.data, ">>hello");
	buf_release(&b);
	buf_release(&out);
}

static void test_decompress_max_exact(void **state)
{
	(void)state;
	char data[5000];
	fill(data, sizeof(data), 7);
	struct buf gz = BUF_INIT, out = BUF_INIT;
	assert_int_equal(gz_compress(data, sizeof(data), &gz), 0);
	assert_int_equal(gz_decompress(gz.data, gz.len, sizeof(data), &out), 0);
	assert_int_equal(out.len, sizeof(data));
	buf_reset(&out);
	assert_int_equal(gz_decompress(gz.data, gz.len, sizeof(data) - 1, &out), -1);
	buf_release(&gz);
	buf_release(&out);
}

static void test_decompress_refuses_bomb(void **state)
{
	(void)state;
	/* 64 MiB of zeros as one gzip member, built a chunk at a time */
	const size_t chunk = 1 << 20, total = (size_t)64 << 20;
	char *zeros = calloc(1, chunk);
	assert_non_null(zeros);
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	assert_int_equal(deflateInit2(&zs, 9, Z_DEFLATED, 15 + 16, 9, Z_DEFAULT_STRATEGY), Z_OK);
	struct buf bomb = BUF_INIT;
	for (size_t done = 0; done < total; done += chunk) {
		int flush = done + chunk == total ? Z_FINISH : Z_NO_FLUSH;
		zs.next_in = (Bytef *)zeros;
		zs.avail_in = (uInt)chunk;
		do {
			buf_reserve(&bomb, 65536);
			zs.next_out = (Bytef *)bomb.data + bomb.len;
			zs.avail_out = (uInt)(bomb.cap - bomb.len - 1);
			uInt before = zs.avail_out;
			int rc = deflate(&zs, flush);
			assert_true(rc == Z_OK || rc == Z_STREAM_END || rc == Z_BUF_ERROR);
			bomb.len += before - zs.avail_out;
		} while (zs.avail_out == 0);
	}
	deflateEnd(&zs);
	free(zeros);
	assert_true(bomb.len < 1 << 20);   /* the bomb is small ... */

	struct buf out = BUF_INIT;
	const size_t max = 1 << 20;
	assert_int_equal(gz_decompress(bomb.data, bomb.len, max, &out), -1);
	/* ... and it was stopped near the limit, not inflated whole */
	assert_true(out.len > max);
	assert_true(out.len <= max + (1 << 20));
	assert_true(out.cap <= 4 * max);
	buf_release(&out);
	buf_release(&bomb);
}

static void test_decompress_refuses_damage(void **state)
{
	(void)state;
	char data[2000];
	fill(data, sizeof(data), 3);
	struct buf gz = BUF_INIT, out = BUF_INIT;
	assert_int_equal(gz_compress(data, sizeof(data), &gz), 0);
	/* truncated */
	assert_int_equal(gz_decompress(gz.data, gz.len - 9, 1 << 20, &out), -1);
	buf_reset(&out);
	/* a wrong CRC */
	gz.data[gz.len - 8] ^= 0x55;
	assert_int_equal(gz_decompress(gz.data, gz.len, 1 << 20, &out), -1);
	buf_reset(&out);
	/* not gzip at all */
	assert_int_equal(gz_decompress("hello, world", 12, 1 << 20, &out), -1);
	buf_reset(&out);
	assert_int_equal(gz_decompress("", 0, 1 << 20, &out), -1);
	buf_release(&gz);
	buf_release(&out);
}

static void test_fragment_is_sync_flushed_not_final(void **state)
{
	(void)state;
	const char msg[] = "{\"version\":7,\"upserts\":[]}\n\n";
	struct buf frag = BUF_INIT, out = BUF_INIT;
	assert_int_equal(gz_stream_fragment(msg, strlen(msg), &frag), 0);
	/* a sync flush ends in an empty stored block: 00 00 ff ff */
	assert_true(frag.len > 4);
	assert_memory_equal(frag.data + frag.len - 4, "\x00\x00\xff\xff", 4);
	/* raw inflate gives the whole text but no end of stream */
	assert_int_equal(inflate_all(frag.data, frag.len, -15, &out), Z_OK);
	assert_int_equal(out.len, strlen(msg));
	assert_memory_equal(out.data, msg, out.len);
	buf_release(&frag);
	buf_release(&out);
}

static void test_stream_of_shared_fragments(void **state)
{
	(void)state;
	/* two pushes compressed once, shared by two streams with their own
	 * per-stream bytes in stored blocks between them */
	char big[70000];
	fill(big, sizeof(big), 11);
	const char *a = "event: push\ndata: {\"version\":1,\"upserts\":[{\"name\":\"cluster/web\"}]}\n\n";
	const char *b = "event: heartbeat\ndata: {\"version\":1}\n\n";
	struct buf fa = BUF_INIT, fb = BUF_INIT, fbig = BUF_INIT;
	assert_int_equal(gz_stream_fragment(a, strlen(a), &fa), 0);
	assert_int_equal(gz_stream_fragment(b, strlen(b), &fb), 0);
	assert_int_equal(gz_stream_fragment(big, sizeof(big), &fbig), 0);
	uint32_t crc_a = gz_crc32(0, a, strlen(a)), crc_b = gz_crc32(0, b, strlen(b));
	uint32_t crc_big = gz_crc32(0, big, sizeof(big));

	for (int stream = 0; stream < 2; stream++) {
		const char *own = stream ? "retry: 2000\n\n: node-2\n" : "retry: 1000\n\n";
		const char *own2 = stream ? "id: 9\n" : "";
		struct buf gz = BUF_INIT, plain = BUF_INIT, out = BUF_INIT;
		uint32_t crc = 0;
		size_t total = 0;

		gz_stream_header(&gz);
		gz_stream_stored(own, strlen(own), &gz);
		buf_puts(&plain, own);
		crc = gz_crc32(crc, own, strlen(own));
		total += strlen(own);

		buf_append(&gz, fa.data, fa.len);
		buf_puts(&plain, a);
		crc = gz_crc32_combine(crc, crc_a, strlen(a));
		total += strlen(a);

		gz_stream_stored(own2, strlen(own2), &gz);   /* may be empty */
		buf_puts(&plain, own2);
		crc = gz_crc32(crc, own2, strlen(own2));
		total += strlen(own2);

		buf_append(&gz, fb.data, fb.len);
		buf_puts(&plain, b);
		crc = gz_crc32_combine(crc, crc_b, strlen(b));
		total += strlen(b);

		buf_append(&gz, fa.data, fa.len);   /* the same fragment again */
		buf_puts(&plain, a);
		crc = gz_crc32_combine(crc, crc_a, strlen(a));
		total += strlen(a);

		if (stream) {
			buf_append(&gz, fbig.data, fbig.len);
			buf_append(&plain, big, sizeof(big));
			crc = gz_crc32_combine(crc, crc_big, sizeof(big));
			total += sizeof(big);
			gz_stream_stored(big, sizeof(big), &gz);   /* > 65535: two stored blocks */
			buf_append(&plain, big, sizeof(big));
			crc = gz_crc32(crc, big, sizeof(big));
			total += sizeof(big);
		}

		/* the combined CRC is the CRC of the whole plaintext */
		assert_int_equal(crc, gz_crc32(0, plain.data, plain.len));
		assert_int_equal(total, plain.len);
		gz_stream_trailer(crc, (uint32_t)total, &gz);

		assert_int_equal(inflate_all(gz.data, gz.len, 15 + 32, &out), Z_STREAM_END);
		assert_int_equal(out.len, plain.len);
		assert_memory_equal(out.data, plain.data, plain.len);

		/* and our own decompressor agrees, CRC and size checked */
		struct buf out2 = BUF_INIT;
		assert_int_equal(gz_decompress(gz.data, gz.len, plain.len, &out2), 0);
		assert_int_equal(out2.len, plain.len);
		buf_release(&out2);

		/* a wrong CRC in the trailer is caught */
		gz.data[gz.len - 5] ^= 1;
		buf_reset(&out);
		assert_int_equal(inflate_all(gz.data, gz.len, 15 + 32, &out), Z_DATA_ERROR);

		buf_release(&gz);
		buf_release(&plain);
		buf_release(&out);
	}
	buf_release(&fa);
	buf_release(&fb);
	buf_release(&fbig);
}

static void test_stored_blocks_and_empty_stream(void **state)
{
	(void)state;
	/* header + trailer only: an empty gzip member */
	struct buf gz = BUF_INIT, out = BUF_INIT;
	gz_stream_header(&gz);
	assert_int_equal(gz.len, 10);
	gz_stream_trailer(gz_crc32(0, "", 0), 0, &gz);
	assert_int_equal(inflate_all(gz.data, gz.len, 15 + 32, &out), Z_STREAM_END);
	assert_int_equal(out.len, 0);
	buf_release(&gz);

	/* stored blocks: 5-byte headers, split at 65535 */
	struct buf st = BUF_INIT;
	char *data = malloc(131071);
	assert_non_null(data);
	fill(data, 131071, 5);
	gz_stream_stored(data, 131071, &st);
	assert_int_equal(st.len, 131071 + 3 * 5);
	assert_memory_equal(st.data, "\x00\xff\xff\x00\x00", 5);
	buf_reset(&out);
	gz_stream_header(&gz);
	buf_append(&gz, st.data, st.len);
	gz_stream_trailer(gz_crc32(0, data, 131071), 131071, &gz);
	assert_int_equal(inflate_all(gz.data, gz.len, 15 + 32, &out), Z_STREAM_END);
	assert_int_equal(out.len, 131071);
	assert_memory_equal(out.data, data, 131071);
	free(data);
	buf_release(&st);
	buf_release(&gz);
	buf_release(&out);
}

static void test_crc(void **state)
{
	(void)state;
	assert_int_equal(gz_crc32(0, "123456789", 9), 0xcbf43926u);   /* the CRC-32 check value */
	assert_int_equal(gz_crc32(gz_crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
	assert_int_equal(gz_crc32_combine(gz_crc32(0, "1234", 4), gz_crc32(0, "56789", 5), 5), 0xcbf43926u);
	assert_int_equal(gz_crc32(0, "", 0), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_round_trip),
		cmocka_unit_test(test_compress_appends),
		cmocka_unit_test(test_decompress_max_exact),
		cmocka_unit_test(test_decompress_refuses_bomb),
		cmocka_unit_test(test_decompress_refuses_damage),
		cmocka_unit_test(test_fragment_is_sync_flushed_not_final),
		cmocka_unit_test(test_stream_of_shared_fragments),
		cmocka_unit_test(test_stored_blocks_and_empty_stream),
		cmocka_unit_test(test_crc),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
