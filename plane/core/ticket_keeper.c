/* core/ticket_keeper.c: the TLS session-ticket keys in the store (see
 * ticket_keeper.h): made when there are none, rotated when due (a
 * compare-and-swap: of two replicas rotating at once, one key wins and
 * the other replica takes it), read again every minute for another
 * replica's rotation. */
#include "core/ticket_keeper.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <gnutls/gnutls.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct ticket_keeper {
	struct persist *p;                 /* NULL: in memory only */
	int64_t rotation_s;
	pthread_mutex_t lock;
	pthread_cond_t cond;
	struct persist_ticket_keys k;      /* under lock */
	uint64_t rev;
	bool stop;
	pthread_t thread;
	bool started;
	atomic_uint_fast64_t rotations;
};

static int fresh_key(unsigned char out[PERSIST_TICKET_KEY])
{
	gnutls_datum_t d = { NULL, 0 };
	if (gnutls_session_ticket_key_generate(&d) < 0 || d.size != PERSIST_TICKET_KEY) {
		if (d.data)
			gnutls_free(d.data);
		return -1;
	}
	memcpy(out, d.data, PERSIST_TICKET_KEY);
	gnutls_memset(d.data, 0, d.size);
	gnutls_free(d.data);
	return 0;
}

/* Loads the keys (under no lock: the thread and open only); rotates them
 * when due, or makes the first. 0, or -1 with err. Each key replaced is
 * wiped. */
static int refresh(struct ticket_keeper *t, bool *rotated, char *err, size_t errlen)
{
	struct persist_ticket_keys k;
	uint64_t rev = 0;
	*rotated = false;
	for (int tries = 0; tries < 4; tries++) {
		int rc = 0;
		if (t->p) {
			rc = t->p->ops->ticket_keys_load(t->p, &k, &rev, err, errlen);
			if (rc == PERSIST_MALFORMED) {
				/* keys are disposable: new ones over it (at its
				 * revision), every ticket a full handshake once */
				log_error("TLS session tickets: %s: replacing them with new keys", err);
				rc = 0;
			} else if (rc < 0) {
				return -1;
			}
		} else {
			pthread_mutex_lock(&t->lock);
			k = t->k;
			pthread_mutex_unlock(&t->lock);
			rc = k.created != 0;
		}
		int64_t now = wall_seconds();
		if (rc == 1 && now - k.created < t->rotation_s) {
			pthread_mutex_lock(&t->lock);
			if (rev != t->rev || memcmp(k.cur, t->k.cur, sizeof(k.cur)) != 0) {
				*rotated = t->k.created != 0;
				t->k = k;
				t->rev = rev;
			}
			pthread_mutex_unlock(&t->lock);
			explicit_bzero(&k, sizeof(k));
			return 0;
		}
		/* none yet, or due: a new current key, the old one previous
		 * (unless it is over two periods old: nothing it made is valid) */
		struct persist_ticket_keys n = { .created = now };
		if (fresh_key(n.cur) < 0) {
			explicit_bzero(&k, sizeof(k));
			snprintf(err, errlen, "TLS session tickets: cannot make a key");
			return -1;
		}
		if (rc == 1 && now - k.created < 2 * t->rotation_s) {
			memcpy(n.prev, k.cur, sizeof(n.prev));
			n.has_prev = true;
		}
		explicit_bzero(&k, sizeof(k));
		if (t->p) {
			rc = t->p->ops->ticket_keys_swap(t->p, &n, &rev, err, errlen);
			if (rc == PERSIST_CONFLICT) {
				explicit_bzero(&n, sizeof(n));
				continue;   /* another replica rotated first: take its keys */
			}
			if (rc < 0) {
				explicit_bzero(&n, sizeof(n));
				return -1;
			}
		}
		pthread_mutex_lock(&t->lock);
		*rotated = t->k.created != 0;
		explicit_bzero(&t->k, sizeof(t->k));
		t->k = n;
		t->rev = rev;
		pthread_mutex_unlock(&t->lock);
		explicit_bzero(&n, sizeof(n));
		return 0;
	}
	snprintf(err, errlen, "TLS session tickets: the keys kept changing while being rotated");
	return -1;
}

static void *run(void *arg)
{
	struct ticket_keeper *t = arg;
	/* other replicas' rotations are read within a minute (or a quarter
	 * of a short period) */
	int64_t every_ms = t->rotation_s * 250;
	if (every_ms > 60000)
		every_ms = 60000;
	if (every_ms < 250)
		every_ms = 250;
	pthread_mutex_lock(&t->lock);
	while (!t->stop) {
		cond_wait_ms(&t->cond, &t->lock, every_ms);
		if (t->stop)
			break;
		pthread_mutex_unlock(&t->lock);
		char err[256];
		bool rotated = false;
		if (refresh(t, &rotated, err, sizeof(err)) < 0)
			log_warn("TLS session tickets: %s (still using the keys loaded before)", err);
		else if (rotated) {
			atomic_fetch_add(&t->rotations, 1);
			log_info("TLS session tickets: the key rotated (the previous one is accepted for one more period)");
		}
		pthread_mutex_lock(&t->lock);
	}
	pthread_mutex_unlock(&t->lock);
	return NULL;
}

struct ticket_keeper *ticket_keeper_open(struct persist *p, int64_t rotation_s, char *err, size_t errlen)
{
	struct ticket_keeper *t = xcalloc(1, sizeof(*t));
	t->p = p && p->ops->ticket_keys_load && p->ops->ticket_keys_swap ? p : NULL;
	t->rotation_s = rotation_s;
	pthread_mutex_init(&t->lock, NULL);
	pthread_cond_init(&t->cond, NULL);
	bool rotated;
	if (refresh(t, &rotated, err, errlen) < 0) {
		ticket_keeper_free(t);
		return NULL;
	}
	if (pthread_create(&t->thread, NULL, run, t) != 0) {
		snprintf(err, errlen, "TLS session tickets: cannot start a thread");
		ticket_keeper_free(t);
		return NULL;
	}
	t->started = true;
	return t;
}

void ticket_keeper_free(struct ticket_keeper *t)
{
	if (!t)
		return;
	if (t->started) {
		pthread_mutex_lock(&t->lock);
		t->stop = true;
		pthread_cond_signal(&t->cond);
		pthread_mutex_unlock(&t->lock);
		pthread_join(t->thread, NULL);
	}
	explicit_bzero(&t->k, sizeof(t->k));
	pthread_cond_destroy(&t->cond);
	pthread_mutex_destroy(&t->lock);
	free(t);
}

uint64_t ticket_keeper_rotations(struct ticket_keeper *t)
{
	return t ? atomic_load(&t->rotations) : 0;
}

void ticket_keeper_keys(struct ticket_keeper *t, struct persist_ticket_keys *out)
{
	pthread_mutex_lock(&t->lock);
	*out = t->k;
	pthread_mutex_unlock(&t->lock);
}

int64_t ticket_keeper_period(struct ticket_keeper *t)
{
	return t->rotation_s;
}
