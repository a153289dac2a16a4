/* consumer/reload.c: hooks, reloads by signal, the marker and health probes
 * (see consumer/reload.h). */
#include "consumer/reload.h"
#include "buf.h"
#include "consumer/runcmd.h"
#include "log.h"
#include "sdnotify.h"
#include "util.h"
#include "xmalloc.h"

#include <curl/curl.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int hook_run(const struct reload_options *o, const char *what, const char *cmd, uint64_t version,
	     const char *staging, char *err, size_t errlen)
{
	char st[4200], out[4200], ver[64];
	snprintf(st, sizeof(st), "TETHER_STAGING=%s", staging ? staging : "");
	snprintf(out, sizeof(out), "TETHER_OUTPUT=%s", o->output_dir);
	snprintf(ver, sizeof(ver), "TETHER_VERSION=%llu", (unsigned long long)version);
	const char *env[] = { st, out, ver, NULL };
	struct runcmd_result res;
	if (runcmd(cmd, env, o->command_timeout, &res, err, errlen) < 0)
		return -1;
	if (res.exit_code == 0 && !res.timed_out)
		return 0;
	char how[RUNCMD_OUTPUT_MAX + 64];
	runcmd_describe(&res, how, sizeof(how));
	snprintf(err, errlen, "%s command failed (%.3000s)", what, how);
	return -1;
}

static int signal_number(const char *name)
{
	if (strcmp(name, "HUP") == 0)
		return SIGHUP;
	if (strcmp(name, "USR1") == 0)
		return SIGUSR1;
	return SIGUSR2;
}

int reload_consumer(const struct reload_options *o, uint64_t version, const char *staging, char *err, size_t errlen)
{
	if (o->reload)
		return hook_run(o, "reload", o->reload, version, staging, err, errlen);
	if (!o->pidfile)
		return 0;
	size_t len;
	char *text = read_file_limited(o->pidfile, 64, &len);
	if (!text && errno == ENOENT)
		return 1;
	if (!text) {
		snprintf(err, errlen, "cannot reload: pidfile '%s': %s", o->pidfile, strerror(errno));
		return -1;
	}
	str_trim(text);
	uint64_t pid;
	int rc = parse_uint_range(text, 2, 4194304, &pid);
	free(text);
	if (rc < 0) {
		snprintf(err, errlen, "cannot reload: pidfile '%s' holds no pid", o->pidfile);
		return -1;
	}
	if (kill((pid_t)pid, signal_number(o->signal)) < 0) {
		if (errno == ESRCH)
			return 1;   /* a stale pidfile: it is not running */
		snprintf(err, errlen, "cannot reload: SIG%s to pid %llu (from '%s'): %s", o->signal,
			 (unsigned long long)pid, o->pidfile, strerror(errno));
		return -1;
	}
	return 0;
}

static size_t collect(char *ptr, size_t size, size_t n, void *ud)
{
	struct buf *b = ud;
	if (b->len < 4096)
		buf_append(b, ptr, size * n);
	return size * n;
}

/* One GET; returns the status (0: no answer) and the body in b. */
static long get(const char *url, double timeout_s, struct buf *b, char *cerr, size_t cerrlen)
{
	CURL *h = curl_easy_init();
	if (!h)
		return 0;
	buf_reset(b);
	curl_easy_setopt(h, CURLOPT_URL, url);
	curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)(timeout_s * 1000));
	curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, collect);
	curl_easy_setopt(h, CURLOPT_WRITEDATA, b);
	curl_easy_setopt(h, CURLOPT_USERAGENT, "tetherd/" PACKAGE_VERSION);
	curl_easy_setopt(h, CURLOPT_FORBID_REUSE, 1L);
	long status = 0;
	CURLcode rc = curl_easy_perform(h);
	if (rc == CURLE_OK)
		curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
	else
		snprintf(cerr, cerrlen, "%s", curl_easy_strerror(rc));
	curl_easy_cleanup(h);
	return status;
}

/* The probes' waits are bounded by their timeouts: the watchdog is fed. */
static void pause_ms(int ms)
{
	sdnotify_watchdog_tick();
	poll(NULL, 0, ms);
}

#define CONFIRMATIONS 3

int reload_confirm(const char *marker, const char *gen, double timeout_s, char *err, size_t errlen)
{
	char *url = xasprintf("http://%s/tether-generation", marker);
	struct buf b = BUF_INIT;
	char last[128] = "no answer", cerr[256] = "";
	int64_t deadline = now_ms() + (int64_t)(timeout_s * 1000);
	int rc = -1, seen = 0;
	for (;;) {
		long status = get(url, 1.0, &b, cerr, sizeof(cerr));
		if (status == 200) {
			str_trim(b.data);
			/* the old workers stop accepting a moment after the new ones
			 * start: only several answers in a row mean it serves */
			if (strcmp(b.data, gen) == 0) {
				if (++seen >= CONFIRMATIONS) {
					rc = 0;
					break;
				}
				pause_ms(30);
				continue;
			}
			seen = 0;
			snprintf(last, sizeof(last), "generation %.64s", b.data);
		} else if (status) {
			snprintf(last, sizeof(last), "HTTP %ld", status);
		} else {
			snprintf(last, sizeof(last), "%s", cerr);
		}
		if (now_ms() >= deadline)
			break;
		pause_ms(50);
	}
	if (rc < 0)
		snprintf(err, errlen, "the consumer did not take generation %s within %gs (its marker at %s says: %s); "
			 "see its error log", gen, timeout_s, marker, last);
	buf_release(&b);
	free(url);
	return rc;
}

int reload_marker_read(const char *marker, double timeout_s, char *out, size_t cap)
{
	char *url = xasprintf("http://%s/tether-generation", marker);
	struct buf b = BUF_INIT;
	char cerr[256];
	long status = get(url, timeout_s, &b, cerr, sizeof(cerr));
	int rc = -1;
	if (status == 200 && b.data) {
		str_trim(b.data);
		snprintf(out, cap, "%s", b.data);
		rc = 0;
	}
	buf_release(&b);
	free(url);
	return rc;
}

int reload_health(const char *url, double timeout_s, unsigned retries, char *err, size_t errlen)
{
	struct buf b = BUF_INIT;
	char last[300] = "";
	int rc = -1;
	for (unsigned i = 0; i < retries; i++) {
		char cerr[256] = "";
		long status = get(url, timeout_s, &b, cerr, sizeof(cerr));
		if (status >= 200 && status < 400) {
			rc = 0;
			break;
		}
		if (status)
			snprintf(last, sizeof(last), "HTTP %ld", status);
		else
			snprintf(last, sizeof(last), "%s", cerr);
		if (i + 1 < retries)
			pause_ms(500);
	}
	if (rc < 0)
		snprintf(err, errlen, "health probe %s failed %u times (last: %s)", url, retries, last);
	buf_release(&b);
	return rc;
}
