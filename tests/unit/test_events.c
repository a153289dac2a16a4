/* test_events.c: unit tests of the operators' event bus (plane/core/events.c):
 * what a subscriber reads, resuming with Last-Event-ID, the reset beyond
 * the ring, a subscriber that falls a ring behind, the events' JSON, and
 * a revoked token. Subscribers here have no connection (never suspended). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "core/events.h"
#include "json.h"
#include "core/nodes.h"
#include "core/store.h"

/* Everything a subscriber has to say now, as one string (owned). */
static char *drain(struct events_sub *s, ssize_t *last)
{
	struct buf b = BUF_INIT;
	char chunk[100];   /* small: events cross reads */
	ssize_t n;
	while ((n = events_sub_read(s, 0, chunk, sizeof(chunk))) > 0)
		buf_append(&b, chunk, (size_t)n);
	*last = n;
	buf_putc(&b, '\0');
	size_t len;
	return buf_detach(&b, &len);
}

static void publish(struct events *e, const char *type, const char *json)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, json);
	events_publish(e, type, &b);
}

/* The id of the nth "id: " line of text (1-based), or 0. */
static unsigned long long nth_id(const char *text, int nth)
{
	const char *p = text;
	for (int i = 0; i < nth; i++) {
		p = strstr(p, "\nid: ");
		if (!p)
			return 0;
		p += 5;
	}
	return strtoull(p, NULL, 10);
}

static void test_new_subscriber_gets_what_comes_after(void **state)
{
	(void)state;
	struct events *e = events_new(10);
	publish(e, "version", "{\"version\":1}");
	struct events_sub *s = events_sub_new(e, NULL, 0, false, NULL);
	ssize_t last;
	char *t = drain(s, &last);
	assert_int_equal(last, 0);   /* nothing yet: it would be suspended */
	assert_non_null(strstr(t, "retry: 2000\n"));
	assert_null(strstr(t, "version"));
	free(t);
	publish(e, "nack", "{\"node\":\"n1\"}");
	publish(e, "ack", "{\"node\":\"n2\"}");
	t = drain(s, &last);
	assert_non_null(strstr(t, "event: nack\n"));
	assert_non_null(strstr(t, "data: {\"node\":\"n2\"}\n\n"));
	assert_true(strstr(t, "event: nack") < strstr(t, "event: ack"));
	unsigned long long a = nth_id(t, 1), b = nth_id(t, 2);
	assert_true(a > 0);
	assert_int_equal(b, a + 1);
	free(t);
	events_sub_free(s);
	events_free(e);
}

static void test_resume_gets_the_gap_and_old_ids_a_reset(void **state)
{
	(void)state;
	struct events *e = events_new(10);
	struct events_sub *s = events_sub_new(e, NULL, 0, false, NULL);
	ssize_t last;
	free(drain(s, &last));
	for (int i = 1; i <= 5; i++) {
		char d[32];
		snprintf(d, sizeof(d), "{\"version\":%d}", i);
		publish(e, "version", d);
	}
	char *t = drain(s, &last);
	unsigned long long id2 = nth_id(t, 2);
	free(t);
	events_sub_free(s);

	/* from the second: the third, fourth and fifth, no reset */
	s = events_sub_new(e, NULL, id2, true, NULL);
	t = drain(s, &last);
	assert_null(strstr(t, "reset"));
	assert_null(strstr(t, "{\"version\":2}"));
	assert_non_null(strstr(t, "{\"version\":3}"));
	assert_non_null(strstr(t, "{\"version\":5}"));
	assert_int_equal(nth_id(t, 1), id2 + 1);
	free(t);
	events_sub_free(s);

	/* from an id the ring never held (older, or from the future) */
	s = events_sub_new(e, NULL, 12, true, NULL);
	t = drain(s, &last);
	assert_non_null(strstr(t, "event: reset\n"));
	assert_null(strstr(t, "{\"version\":"));
	free(t);
	events_sub_free(s);
	s = events_sub_new(e, NULL, id2 + 100, true, NULL);
	t = drain(s, &last);
	assert_non_null(strstr(t, "event: reset\n"));
	free(t);
	events_sub_free(s);
	events_free(e);
}

static void test_a_subscriber_a_ring_behind_is_closed(void **state)
{
	(void)state;
	struct events *e = events_new(10);
	struct events_sub *s = events_sub_new(e, NULL, 0, false, NULL);
	ssize_t last;
	free(drain(s, &last));
	for (int i = 0; i < EVENTS_RING + 1; i++)
		publish(e, "version", "{}");
	char *t = drain(s, &last);
	assert_int_equal(last, HTTP_READER_ERROR);
	free(t);
	events_sub_free(s);
	struct buf m = BUF_INIT;
	events_metrics(e, &m);
	buf_putc(&m, '\0');
	assert_non_null(strstr(m.data, "tether_events_dropped_total 1\n"));
	assert_non_null(strstr(m.data, "tether_events_published_total 1001\n"));
	assert_non_null(strstr(m.data, "tether_events_subscribers 0\n"));
	buf_release(&m);
	/* a new one starts from now, and a resume from the first event's id
	 * (gone from the ring) gets a reset */
	s = events_sub_new(e, NULL, 1, true, NULL);
	t = drain(s, &last);
	assert_non_null(strstr(t, "event: reset"));
	free(t);
	events_sub_free(s);
	events_free(e);
}

/* The data of the first event of type in text, parsed. */
static cJSON *first_data(const char *text, const char *type)
{
	char want[48];
	snprintf(want, sizeof(want), "event: %s\n", type);
	const char *p = strstr(text, want);
	assert_non_null(p);
	p = strstr(p, "data: ");
	assert_non_null(p);
	p += 6;
	size_t n = strcspn(p, "\n");
	char err[128];
	struct json_limits lim = { 1 << 20, 16 };
	cJSON *d = json_decode(p, n, &lim, err, sizeof(err));
	assert_non_null(d);
	return d;
}

static void test_event_bodies(void **state)
{
	(void)state;
	struct events *e = events_new(10);
	struct events_sub *s = events_sub_new(e, NULL, 0, false, NULL);
	ssize_t last;
	free(drain(s, &last));
	struct store_change ch[2] = { { .name = "file/a" }, { .name = "cluster/b" } };
	events_version(e, 7, ch, 2, "write");
	struct ack_msg m = { .node = "web-1", .version = 7, .nack = true,
			     .error = "line one\nline \"two\"\t\x01", .healthy = -1 };
	events_ack(e, &m);
	events_node(e, "web-1", false);
	char *t = drain(s, &last);
	cJSON *d = first_data(t, "version");
	assert_string_equal(json_get_string(d, "origin"), "write");
	assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(d, "names")), 2);
	assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(d, "names"), 1)->valuestring, "cluster/b");
	cJSON_Delete(d);
	/* the error travels whole, escaped: one data line */
	d = first_data(t, "nack");
	assert_string_equal(json_get_string(d, "error"), "line one\nline \"two\"\t\x01");
	assert_string_equal(json_get_string(d, "node"), "web-1");
	assert_null(cJSON_GetObjectItem(d, "healthy"));
	cJSON_Delete(d);
	d = first_data(t, "node");
	assert_true(cJSON_IsFalse(cJSON_GetObjectItem(d, "connected")));
	cJSON_Delete(d);
	free(t);
	events_sub_free(s);
	events_free(e);
}

static void test_revoked_token_ends_its_streams(void **state)
{
	(void)state;
	struct events *e = events_new(10);
	struct events_sub *a = events_sub_new(e, NULL, 0, false, "aaaaaaaaaaaa");
	struct events_sub *b = events_sub_new(e, NULL, 0, false, "bbbbbbbbbbbb");
	ssize_t last;
	free(drain(a, &last));
	free(drain(b, &last));
	assert_int_equal(events_close_token(e, "aaaaaaaaaaaa"), 1);
	assert_int_equal(events_close_token(e, ""), 0);
	free(drain(a, &last));
	assert_int_equal(last, HTTP_READER_END);
	free(drain(b, &last));
	assert_int_equal(last, 0);
	events_sub_free(a);
	events_sub_free(b);
	events_free(e);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_new_subscriber_gets_what_comes_after),
		cmocka_unit_test(test_resume_gets_the_gap_and_old_ids_a_reset),
		cmocka_unit_test(test_a_subscriber_a_ring_behind_is_closed),
		cmocka_unit_test(test_event_bodies),
		cmocka_unit_test(test_revoked_token_ends_its_streams),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
