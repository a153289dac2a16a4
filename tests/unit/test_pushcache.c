/* test_pushcache.c: unit tests of plane/core/pushcache.c: shared encoded pushes
 * keyed by (have, version, subscription), eviction, and the gzip fragment. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "buf.h"
#include "persist/persist.h"
#include "core/delta.h"
#include "gz.h"
#include "log.h"
#include "core/pushcache.h"
#include "core/store.h"
#include "tmpdir.h"
#include "core/validate.h"

#define CLUSTER "{\"endpoints\":[{\"address\":\"10.0.0.1\",\"port\":80}]}"
#define LISTENER "{\"port\":8080}"

struct fixture {
	char dir[64];
	struct persist *db;
	struct store *s;
	struct pushcache *pc;
};

static int setup(void **state)
{
	struct fixture *f = calloc(1, sizeof(*f));
	if (!f)
		return -1;
	if (test_tmpdir_make(f->dir, sizeof(f->dir), "pushcache") < 0) {
		free(f);
		return -1;
	}
	*state = f;
	char err[256];
	struct store_opts opts = { .tombstone_keep = 1 };
	f->db = persist_sqlite_open(f->dir, err, sizeof(err));
	if (!f->db)
		return -1;
	f->s = store_open(f->db, &opts, err, sizeof(err));
	if (!f->s)
		return -1;
	f->pc = pushcache_new(f->s, 4, 1 << 20);
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;
	pushcache_free(f->pc);
	store_free(f->s);
	persist_close(f->db);
	int rc = test_tmpdir_remove(f->dir);
	free(f);
	return rc;
}

static uint64_t put1(struct fixture *f, const char *name, const char *json)
{
	cJSON *body = cJSON_Parse(json);
	assert_non_null(body);
	struct store_change c;
	char err[256];
	if (validate_upsert(name, body, &c, err, sizeof(err)) < 0)
		fail_msg("validate_upsert %s: %s", name, err);
	cJSON_Delete(body);
	uint64_t v = 0;
	bool changed;
	store_write_lock(f->s);
	int rc = store_commit(f->s, &c, 1, &v, &changed, err, sizeof(err));
	store_write_unlock(f->s);
	free(c.body);
	if (rc < 0)
		fail_msg("store_commit: %s", err);
	return v;
}

static uint64_t del1(struct fixture *f, const char *name)
{
	struct store_change c = { .name = name };
	uint64_t v = 0;
	bool changed;
	char err[256];
	store_write_lock(f->s);
	assert_int_equal(store_commit(f->s, &c, 1, &v, &changed, err, sizeof(err)), 0);
	store_write_unlock(f->s);
	return v;
}

static void seed(struct fixture *f)
{
	put1(f, "cluster/a", CLUSTER);    /* 1 */
	put1(f, "cluster/b", CLUSTER);    /* 2 */
	put1(f, "listener/l", LISTENER);  /* 3 */
}

/* The push a node receives: {"nonce":"n", + raw. */
static cJSON *parse_push(const struct push_blob *b)
{
	struct buf t = BUF_INIT;
	buf_puts(&t, "{\"nonce\":\"n\",");
	buf_append(&t, b->raw, b->raw_len);
	cJSON *v = cJSON_Parse(t.data);
	if (!v)
		fail_msg("push does not parse: %s", t.data);
	buf_release(&t);
	return v;
}

static void test_same_key_same_blob(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct push_blob *a = pushcache_get(f->pc, 1, NULL);
	struct push_blob *b = pushcache_get(f->pc, 1, NULL);
	assert_non_null(a);
	assert_ptr_equal(a, b);
	assert_int_equal(atomic_load(&a->refs), 3);   /* the cache and two callers */
	assert_int_equal(a->version, 3);
	assert_int_equal(a->base, 1);
	assert_false(a->full);
	assert_int_equal(a->nup, 2);
	assert_int_equal(a->nrm, 0);
	assert_int_equal(a->raw_len, strlen(a->raw));
	cJSON *v = parse_push(a);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(v, "version")->valuedouble, 3);
	assert_int_equal(cJSON_GetObjectItemCaseSensitive(v, "base")->valuedouble, 1);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(v, "upserts")), 2);
	cJSON_Delete(v);
	/* the blob is exactly what the delta computer encodes */
	struct delta d;
	struct buf t = BUF_INIT;
	store_rdlock(f->s);
	delta_collect(f->s, 1, NULL, &d);
	delta_encode_tail(&d, &t);
	store_rdunlock(f->s);
	delta_release(&d);
	assert_int_equal(t.len, a->raw_len);
	assert_memory_equal(t.data, a->raw, t.len);
	buf_release(&t);

	struct pushcache_stats st;
	pushcache_stats(f->pc, &st);
	assert_int_equal(st.hits, 1);
	assert_int_equal(st.misses, 1);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, a->raw_len);
	push_blob_unref(a);
	push_blob_unref(b);
}

static void test_snapshots_share_one_blob(void **state)
{
	struct fixture *f = *state;
	seed(f);
	del1(f, "cluster/a");            /* 4 */
	del1(f, "cluster/b");            /* 5: horizon 4 */
	assert_int_equal(store_horizon(f->s), 4);
	/* have 0, below the horizon and ahead of the store all get the snapshot */
	struct push_blob *a = pushcache_get(f->pc, 0, NULL);
	struct push_blob *b = pushcache_get(f->pc, 2, NULL);
	struct push_blob *c = pushcache_get(f->pc, 99, NULL);
	assert_ptr_equal(a, b);
	assert_ptr_equal(a, c);
	assert_true(a->full);
	assert_int_equal(a->base, 0);
	assert_int_equal(a->nup, 1);
	assert_int_equal(a->nrm, 0);
	/* at the horizon: a real delta */
	struct push_blob *d = pushcache_get(f->pc, 4, NULL);
	assert_ptr_not_equal(a, d);
	assert_false(d->full);
	assert_int_equal(d->nrm, 1);
	push_blob_unref(a);
	push_blob_unref(b);
	push_blob_unref(c);
	push_blob_unref(d);
}

static void test_different_sub_different_blob(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct sub s1, s2, s3;
	char err[128];
	assert_int_equal(sub_parse("cluster/", &s1, err, sizeof(err)), 0);
	assert_int_equal(sub_parse("listener/,cluster/a", &s2, err, sizeof(err)), 0);
	assert_int_equal(sub_parse("cluster/a,listener/", &s3, err, sizeof(err)), 0);
	struct push_blob *all = pushcache_get(f->pc, 0, NULL);
	struct push_blob *b1 = pushcache_get(f->pc, 0, &s1);
	struct push_blob *b2 = pushcache_get(f->pc, 0, &s2);
	struct push_blob *b3 = pushcache_get(f->pc, 0, &s3);
	assert_ptr_not_equal(all, b1);
	assert_ptr_not_equal(b1, b2);
	assert_ptr_not_equal(all, b2);
	assert_ptr_equal(b2, b3);   /* the same set, written in another order */
	assert_int_equal(all->nup, 3);
	assert_int_equal(b1->nup, 2);
	assert_int_equal(b2->nup, 2);
	assert_non_null(strstr(b2->raw, "\"listener/l\""));
	assert_null(strstr(b2->raw, "\"cluster/b\""));
	struct pushcache_stats st;
	pushcache_stats(f->pc, &st);
	assert_int_equal(st.entries, 3);
	assert_int_equal(st.misses, 3);
	assert_int_equal(st.hits, 1);
	push_blob_unref(all);
	push_blob_unref(b1);
	push_blob_unref(b2);
	push_blob_unref(b3);
	sub_release(&s1);
	sub_release(&s2);
	sub_release(&s3);
}

static void test_commit_gives_new_blob(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct push_blob *a = pushcache_get(f->pc, 2, NULL);
	assert_int_equal(a->version, 3);
	assert_int_equal(a->nup, 1);
	put1(f, "cluster/c", CLUSTER);   /* 4 */
	struct push_blob *b = pushcache_get(f->pc, 2, NULL);
	assert_ptr_not_equal(a, b);
	assert_int_equal(b->version, 4);
	assert_int_equal(b->base, 2);
	assert_int_equal(b->nup, 2);
	/* the old blob is intact for whoever still holds it */
	assert_int_equal(a->version, 3);
	cJSON *v = parse_push(a);
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItemCaseSensitive(v, "upserts")), 1);
	cJSON_Delete(v);
	/* a no-op write makes no version, so the blob is shared still */
	put1(f, "cluster/c", CLUSTER);
	struct push_blob *c = pushcache_get(f->pc, 2, NULL);
	assert_ptr_equal(b, c);
	push_blob_unref(a);
	push_blob_unref(b);
	push_blob_unref(c);
}

static void test_eviction_beyond_max_entries(void **state)
{
	struct fixture *f = *state;
	seed(f);
	pushcache_free(f->pc);
	f->pc = pushcache_new(f->s, 2, 1 << 20);
	struct push_blob *b0 = pushcache_get(f->pc, 0, NULL);
	struct push_blob *b1 = pushcache_get(f->pc, 1, NULL);
	/* touch b0 so b1 is the least recently used */
	push_blob_unref(pushcache_get(f->pc, 0, NULL));
	struct push_blob *b2 = pushcache_get(f->pc, 2, NULL);
	struct pushcache_stats st;
	pushcache_stats(f->pc, &st);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.bytes, b0->raw_len + b2->raw_len);
	assert_int_equal(atomic_load(&b1->refs), 1);   /* only ours is left */
	/* b0 is still cached, b1 was evicted: a new blob */
	struct push_blob *again0 = pushcache_get(f->pc, 0, NULL);
	assert_ptr_equal(again0, b0);
	struct push_blob *again1 = pushcache_get(f->pc, 1, NULL);
	assert_ptr_not_equal(again1, b1);
	assert_int_equal(again1->raw_len, b1->raw_len);
	assert_memory_equal(again1->raw, b1->raw, b1->raw_len);
	pushcache_stats(f->pc, &st);
	assert_int_equal(st.entries, 2);
	assert_int_equal(st.misses, 4);
	assert_int_equal(st.hits, 2);
	push_blob_unref(b0);
	push_blob_unref(b1);
	push_blob_unref(b2);
	push_blob_unref(again0);
	push_blob_unref(again1);
}

static void test_eviction_by_bytes_keeps_newest(void **state)
{
	struct fixture *f = *state;
	seed(f);
	pushcache_free(f->pc);
	f->pc = pushcache_new(f->s, 100, 1);   /* every blob is over the byte budget */
	struct push_blob *a = pushcache_get(f->pc, 0, NULL);
	struct push_blob *b = pushcache_get(f->pc, 1, NULL);
	struct pushcache_stats st;
	pushcache_stats(f->pc, &st);
	assert_int_equal(st.entries, 1);
	assert_int_equal(st.bytes, b->raw_len);
	struct push_blob *b2 = pushcache_get(f->pc, 1, NULL);
	assert_ptr_equal(b, b2);
	push_blob_unref(a);
	push_blob_unref(b);
	push_blob_unref(b2);
}

static void test_gzip_fragment(void **state)
{
	struct fixture *f = *state;
	seed(f);
	struct push_blob *b = pushcache_get(f->pc, 0, NULL);
	assert_false(atomic_load(&b->gz_ready));
	assert_null(b->gz);
	pushcache_gzip(f->pc, b);
	assert_true(atomic_load(&b->gz_ready));
	assert_non_null(b->gz);
	char *gz = b->gz;
	pushcache_gzip(f->pc, b);   /* computed once */
	assert_ptr_equal(b->gz, gz);

	struct buf want = BUF_INIT;
	buf_append(&want, b->raw, b->raw_len);
	buf_puts(&want, "\n\n");
	assert_int_equal(b->gz_crc, gz_crc32(0, want.data, want.len));

	/* raw inflate of the fragment gives raw + "\n\n", not the end of a stream */
	z_stream zs;
	memset(&zs, 0, sizeof(zs));
	assert_int_equal(inflateInit2(&zs, -15), Z_OK);
	char *out = malloc(want.len + 64);
	assert_non_null(out);
	zs.next_in = (Bytef *)b->gz;
	zs.avail_in = (uInt)b->gz_len;
	zs.next_out = (Bytef *)out;
	zs.avail_out = (uInt)(want.len + 64);
	int rc = inflate(&zs, Z_SYNC_FLUSH);
	assert_int_equal(rc, Z_OK);
	assert_int_equal(zs.avail_in, 0);
	assert_int_equal(zs.total_out, want.len);
	assert_memory_equal(out, want.data, want.len);
	inflateEnd(&zs);
	free(out);

	/* framed as a gzip member with the blob's CRC it is a valid stream */
	struct buf stream = BUF_INIT, plain = BUF_INIT;
	gz_stream_header(&stream);
	buf_append(&stream, b->gz, b->gz_len);
	buf_append(&stream, b->gz, b->gz_len);   /* the same push twice */
	gz_stream_trailer(gz_crc32_combine(b->gz_crc, b->gz_crc, want.len), (uint32_t)(2 * want.len), &stream);
	assert_int_equal(gz_decompress(stream.data, stream.len, 2 * want.len, &plain), 0);
	assert_int_equal(plain.len, 2 * want.len);
	assert_memory_equal(plain.data, want.data, want.len);
	assert_memory_equal(plain.data + want.len, want.data, want.len);

	/* the gzip bytes count against the cache */
	struct pushcache_stats st;
	pushcache_stats(f->pc, &st);
	assert_int_equal(st.bytes, b->raw_len + b->gz_len);
	buf_release(&stream);
	buf_release(&plain);
	buf_release(&want);
	push_blob_unref(b);
	pushcache_stats(f->pc, &st);
	assert_int_equal(st.entries, 1);   /* the cache keeps its own reference */
}

int main(void)
{
	log_init("test_pushcache", LOG_LVL_WARN);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_same_key_same_blob, setup, teardown),
		cmocka_unit_test_setup_teardown(test_snapshots_share_one_blob, setup, teardown),
		cmocka_unit_test_setup_teardown(test_different_sub_different_blob, setup, teardown),
		cmocka_unit_test_setup_teardown(test_commit_gives_new_blob, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eviction_beyond_max_entries, setup, teardown),
		cmocka_unit_test_setup_teardown(test_eviction_by_bytes_keeps_newest, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gzip_fragment, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
