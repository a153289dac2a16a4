/* status.c: status.json writing (see status.h). */
#include "status.h"
#include "buf.h"
#include "util.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *const names[] = { "booting", "offline", "syncing", "synced", "degraded", "stale", "deferred" };

const char *status_state_name(enum agent_state s)
{
	return names[s];
}

int status_write(const char *dir, const struct status *st, char *err, size_t errlen)
{
	struct buf b = BUF_INIT;
	buf_puts(&b, "{\"node\":");
	buf_json_string(&b, st->node);
	buf_printf(&b, ",\"version\":%llu,\"state\":\"%s\",\"last_error\":", (unsigned long long)st->version,
		   names[st->state]);
	buf_json_string(&b, st->last_error ? st->last_error : "");
	buf_printf(&b, ",\"last_sync\":%lld,\"plane\":", (long long)st->last_sync);
	buf_json_string(&b, st->plane);
	buf_puts(&b, ",\"planes\":[");
	for (size_t i = 0; i < st->nplanes; i++) {
		if (i)
			buf_putc(&b, ',');
		buf_json_string(&b, st->planes[i]);
	}
	buf_puts(&b, "],\"plane_stale\":");
	if (st->plane_stale) {
		buf_printf(&b, "{\"since\":%lld,\"why\":", (long long)st->plane_stale_since);
		buf_json_string(&b, st->plane_stale_why ? st->plane_stale_why : "");
		buf_putc(&b, '}');
	} else {
		buf_puts(&b, "null");
	}
	buf_puts(&b, ",\"transport\":");
	buf_json_string(&b, st->transport);
	buf_puts(&b, ",\"consumer\":");
	buf_json_string(&b, st->consumer);
	buf_printf(&b, ",\"plane_version\":%llu,\"resources\":%zu,\"state_bytes\":%zu,\"pushes_applied\":%llu,"
		   "\"pushes_rejected\":%llu,\"started\":%lld,\"pid\":%ld",
		   (unsigned long long)st->plane_version, st->resources, st->state_bytes, (unsigned long long)st->applied,
		   (unsigned long long)st->rejected, (long long)st->started, (long)getpid());
	if (st->trusted) {
		buf_printf(&b, ",\"trust\":{\"verified_version\":%llu,\"stale\":%s,\"key_id\":",
			   (unsigned long long)st->verified_version, st->stale ? "true" : "false");
		buf_json_string(&b, st->key_id ? st->key_id : "");
		if (st->approvals) {   /* what a version needs besides the statement */
			buf_printf(&b, ",\"approvals_required\":%llu,\"approvers\":", (unsigned long long)st->approvals);
			buf_json_string(&b, st->approvers ? st->approvers : "");
		}
		buf_putc(&b, '}');
	}
	buf_puts(&b, "}\n");

	char *path = xasprintf("%s/status.json", dir);
	int rc = write_file_replace(path, b.data, b.len, 0644, true);
	if (rc < 0)
		snprintf(err, errlen, "cannot write '%s': %s", path, strerror(errno));
	free(path);
	buf_release(&b);
	return rc;
}
