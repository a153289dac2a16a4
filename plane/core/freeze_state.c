/* core/freeze_state.c: the freeze window as the plane keeps it (see
 * freeze_state.h). */
#include "core/freeze_state.h"
#include "core/events.h"
#include "log.h"
#include "net/httpd.h"
#include "persist/persist.h"
#include "util.h"
#include "xmalloc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* How often the keeper looks at a shared backend's record. */
#define RELOAD_EVERY_MS 1000

struct freeze_state {
	struct persist *ps;
	struct events *ev;
	bool shared;                 /* other replicas may set it */
	pthread_mutex_t lock;
	bool have;                   /* rec: the stored record as last seen */
	struct freeze_rec rec;
	bool announced;              /* shown: the freeze event of shown was published, no thaw yet */
	struct freeze_rec shown;
	int64_t next_reload_ms;
	uint64_t gen;                /* bumped by each set or read of the backend that updates rec */
	bool blind;                  /* freeze_state_blocks could not read the backend (said once) */
};

static bool same(const struct freeze_rec *a, const struct freeze_rec *b)
{
	return a->until == b->until && a->at == b->at && strcmp(a->by, b->by) == 0 &&
	       strcmp(a->message, b->message) == 0;
}

/* Loads the stored record: 1 with *out, 0 none, <0 with err. */
static int load(struct freeze_state *f, struct freeze_rec *out, char *err, size_t errlen)
{
	if (!f->ps->ops->freeze_load)
		return 0;
	char *json = NULL;
	int rc = f->ps->ops->freeze_load(f->ps, &json, err, errlen);
	if (rc == 1 && freeze_rec_parse(json, strlen(json), out, err, errlen) < 0) {
		/* a record that cannot be read: no freeze, said loudly */
		log_warn("freeze: the stored freeze record cannot be read (%s): no freeze holds; set it again with "
			 "tetherctl freeze", err);
		rc = 0;
	}
	free(json);
	return rc;
}

/* Under lock: what is seen now is have/rec; publishes freeze and thaw
 * when what holds changed since the last event (ended_by: who ended it,
 * NULL when unknown or by time). */
static void observe(struct freeze_state *f, const char *ended_by)
{
	int64_t now = wall_seconds();
	bool holds = f->have && freeze_active(&f->rec, now);
	if (f->announced && (!holds || !same(&f->shown, &f->rec))) {
		bool by_time = now >= f->shown.until && (!f->have || same(&f->shown, &f->rec));
		struct buf b = BUF_INIT;
		freeze_rec_json(&f->shown, &b);
		b.len--;   /* the record's closing brace */
		buf_printf(&b, ",\"ended\":\"%s\"", by_time ? "time" : holds ? "replaced" : "off");
		if (ended_by && !by_time) {
			buf_puts(&b, ",\"ended_by\":");
			buf_json_string(&b, ended_by);
		}
		buf_putc(&b, '}');
		char when[32];
		freeze_time_text(f->shown.until, when);
		log_info("freeze: the freeze until %s by %s ended (%s)", when, f->shown.by,
			 by_time ? "its time came" : holds ? "a new freeze replaced it" : "turned off");
		events_publish(f->ev, "thaw", &b);
		f->announced = false;
	}
	if (holds && !f->announced) {
		struct buf b = BUF_INIT;
		freeze_rec_json(&f->rec, &b);
		char when[32];
		freeze_time_text(f->rec.until, when);
		log_info("freeze: writes and rollouts frozen until %s by %s: %s", when, f->rec.by, f->rec.message);
		events_publish(f->ev, "freeze", &b);
		f->shown = f->rec;
		f->announced = true;
	}
}

struct freeze_state *freeze_state_new(struct persist *ps, struct events *ev)
{
	struct freeze_state *f = xcalloc(1, sizeof(*f));
	f->ps = ps;
	f->ev = ev;
	f->shared = ps->ops->follow != NULL;
	pthread_mutex_init(&f->lock, NULL);
	char err[512];
	int rc = load(f, &f->rec, err, sizeof(err));
	if (rc < 0)
		log_warn("freeze: cannot read the freeze record now (%s): a write asks again", err);
	f->have = rc == 1;
	f->next_reload_ms = now_ms() + RELOAD_EVERY_MS;
	pthread_mutex_lock(&f->lock);
	observe(f, NULL);
	pthread_mutex_unlock(&f->lock);
	return f;
}

void freeze_state_free(struct freeze_state *f)
{
	if (!f)
		return;
	pthread_mutex_destroy(&f->lock);
	free(f);
}

bool freeze_state_now(struct freeze_state *f, struct freeze_rec *out)
{
	if (!f)
		return false;
	pthread_mutex_lock(&f->lock);
	bool holds = f->have && freeze_active(&f->rec, wall_seconds());
	if (holds && out)
		*out = f->rec;
	pthread_mutex_unlock(&f->lock);
	return holds;
}

int freeze_state_read(struct freeze_state *f, struct freeze_rec *out, char *err, size_t errlen)
{
	struct freeze_rec r;
	int rc = load(f, &r, err, errlen);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&f->lock);
	f->have = rc == 1;
	if (f->have)
		f->rec = r;
	f->gen++;
	observe(f, NULL);
	pthread_mutex_unlock(&f->lock);
	if (rc == 1 && freeze_active(&r, wall_seconds())) {
		*out = r;
		return 1;
	}
	return 0;
}

int freeze_state_set(struct freeze_state *f, const struct freeze_rec *rec, const char *ended_by, char *err,
		     size_t errlen)
{
	if (!f->ps->ops->freeze_save) {
		snprintf(err, errlen, "the %s store keeps no freeze: set it on the plane that takes writes",
			 f->ps->ops->name);
		return -1;
	}
	struct buf b = BUF_INIT;
	if (rec)
		freeze_rec_json(rec, &b);
	buf_putc(&b, '\0');
	int rc = f->ps->ops->freeze_save(f->ps, rec ? b.data : NULL, err, errlen);
	buf_release(&b);
	if (rc < 0)
		return rc;
	pthread_mutex_lock(&f->lock);
	f->have = rec != NULL;
	if (rec)
		f->rec = *rec;
	f->gen++;
	observe(f, ended_by);
	pthread_mutex_unlock(&f->lock);
	return 0;
}

void freeze_state_tick(struct freeze_state *f)
{
	if (!f)
		return;
	struct freeze_rec r;
	int rc = 0;
	char err[512];
	bool reload = f->shared && now_ms() >= f->next_reload_ms;
	uint64_t gen = 0;
	if (reload) {
		pthread_mutex_lock(&f->lock);
		gen = f->gen;
		pthread_mutex_unlock(&f->lock);
		rc = load(f, &r, err, sizeof(err));
		f->next_reload_ms = now_ms() + RELOAD_EVERY_MS;   /* the keeper's thread alone */
	}
	pthread_mutex_lock(&f->lock);
	/* a set or a write's read since our load saw newer: ours is not put
	 * over it (a thaw and a freeze again would be announced for nothing) */
	if (reload && rc >= 0 && gen == f->gen) {
		f->have = rc == 1;
		if (f->have)
			f->rec = r;
	}
	observe(f, NULL);
	pthread_mutex_unlock(&f->lock);
}

unsigned freeze_state_check(struct freeze_state *f, const char *override, bool admin, bool *passed, char *err,
			    size_t errlen)
{
	*passed = false;
	if (!f)
		return 0;
	struct freeze_rec r;
	char why[512];
	int rc = freeze_state_read(f, &r, why, sizeof(why));
	if (rc == 0)
		return 0;
	if (rc < 0) {
		snprintf(err, errlen,
			 "the store is read-only now: the freeze window cannot be read (%s); nothing was stored; "
			 "try again", why);
		return HTTP_SERVICE_UNAVAILABLE;
	}
	if (override && admin) {
		*passed = true;   /* an admin's override: it goes, and the version log says so */
		return 0;
	}
	char msg[2048];
	freeze_refusal(&r, msg, sizeof(msg));
	if (override)
		snprintf(err, errlen, "%s; nothing was stored: --override passes a freeze only for an admin, and this "
			 "caller is not one", msg);
	else
		snprintf(err, errlen, "%s; nothing was stored", msg);
	return HTTP_LOCKED;
}

void freeze_state_passed(struct freeze_state *f, uint64_t version, const char *author, const char *override)
{
	if (!f)
		return;
	struct freeze_rec r;
	bool holds = freeze_state_now(f, &r);
	const char *by = author ? author : "";
	const char *reason = override ? override : "";
	log_info("freeze: version %llu by %s passed the freeze with an admin's override: %s",
		 (unsigned long long)version, by, reason);
	struct buf b = BUF_INIT;
	buf_printf(&b, "{\"version\":%llu,\"by\":", (unsigned long long)version);
	buf_json_string(&b, by);
	buf_puts(&b, ",\"reason\":");
	buf_json_string(&b, reason);
	if (holds) {
		buf_puts(&b, ",\"freeze\":");
		freeze_rec_json(&r, &b);
	}
	buf_putc(&b, '}');
	events_publish(f->ev, "freeze_passed", &b);
}

bool freeze_state_holds(struct freeze_state *f, char *why, size_t cap)
{
	struct freeze_rec r;
	if (!freeze_state_now(f, &r))
		return false;
	if (why && cap)
		freeze_hold_text(&r, why, cap);
	return true;
}

bool freeze_state_blocks(struct freeze_state *f)
{
	if (!f)
		return false;
	struct freeze_rec r;
	char err[512];
	int rc = freeze_state_read(f, &r, err, sizeof(err));
	pthread_mutex_lock(&f->lock);
	bool was = f->blind;
	f->blind = rc < 0;
	pthread_mutex_unlock(&f->lock);
	if (rc < 0 && !was)
		log_warn("freeze: cannot read the freeze window from the store (%s): the rollout waits until it can", err);
	else if (rc >= 0 && was)
		log_info("freeze: the freeze window can be read again");
	return rc != 0;
}

void freeze_state_member(struct freeze_state *f, struct buf *out)
{
	struct freeze_rec r;
	if (!freeze_state_now(f, &r))
		return;
	buf_puts(out, ",\"freeze\":");
	freeze_rec_json(&r, out);
}

void freeze_state_metrics(struct freeze_state *f, struct buf *out)
{
	buf_printf(out, "# HELP tether_frozen 1 while a freeze window holds (writes refused with 423, rollouts "
		   "held).\n# TYPE tether_frozen gauge\ntether_frozen %d\n", freeze_state_now(f, NULL) ? 1 : 0);
}
