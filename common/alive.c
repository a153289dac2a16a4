/* alive.c: which of the plane's threads still turn (see alive.h). A
 * fixed table of slots, each written by its own thread and read by the
 * ticker, all atomics: nothing here takes a lock. */
#include "alive.h"
#include "util.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#define SLOTS 64

struct slot {
	atomic_bool used;
	atomic_int_fast64_t parked_until;   /* 0: not parked; INT64_MAX: until work comes */
	atomic_int_fast64_t beat_ms;
	char name[24];
};

static struct slot slots[SLOTS];
static _Thread_local struct slot *mine;

void alive_enter(const char *name)
{
	char comm[16];
	snprintf(comm, sizeof(comm), "tp-%s", name);
	pthread_setname_np(pthread_self(), comm);
	for (size_t i = 0; i < SLOTS; i++) {
		bool free_ = false;
		if (atomic_compare_exchange_strong(&slots[i].used, &free_, true)) {
			snprintf(slots[i].name, sizeof(slots[i].name), "%s", name);
			atomic_store(&slots[i].parked_until, 0);
			atomic_store(&slots[i].beat_ms, now_ms());   /* after the name: a checker reads it second */
			mine = &slots[i];
			return;
		}
	}
}

void alive_leave(void)
{
	if (mine) {
		atomic_store(&mine->beat_ms, 0);
		atomic_store(&mine->used, false);
		mine = NULL;
	}
}

void alive_beat(void)
{
	if (mine)
		atomic_store(&mine->beat_ms, now_ms());
}

void alive_park(int64_t max_ms)
{
	if (mine)
		atomic_store(&mine->parked_until, max_ms < 0 ? INT64_MAX : now_ms() + max_ms);
}

void alive_unpark(void)
{
	if (!mine)
		return;
	atomic_store(&mine->beat_ms, now_ms());
	atomic_store(&mine->parked_until, 0);
}

static int beat_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	(void)ud, (void)dt, (void)dn, (void)ut, (void)un;
	alive_beat();
	return 0;
}

void alive_curl(void *curl)
{
	curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
	curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, beat_progress);
}

int alive_check(int64_t bound_ms, char *who, size_t cap)
{
	int64_t now = now_ms(), worst = 0;
	const struct slot *stuck = NULL;
	for (size_t i = 0; i < SLOTS; i++) {
		const struct slot *s = &slots[i];
		/* parked_until first: alive_unpark stores the beat, then clears it */
		int64_t until = atomic_load(&s->parked_until), beat = atomic_load(&s->beat_ms);
		if (!atomic_load(&s->used) || !beat || until == INT64_MAX)
			continue;
		/* a wait with a bound counts as turning until it is over */
		int64_t age = now - (until > beat ? until : beat);
		if (age > bound_ms && age > worst) {
			worst = age;
			stuck = s;
		}
	}
	if (!stuck)
		return 0;
	snprintf(who, cap, "%s: %.1f s since it last turned", stuck->name, (double)worst / 1000.0);
	return -1;
}
