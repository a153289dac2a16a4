/* consumer/files.c: the files consumer: each `file` resource is a file at
 * its path under --output-dir, with its mode. A push stages the files it
 * writes in OUTPUT_DIR/.tether-work/staging (the check runs there), then
 * swaps them in with renames, moving what they replace to .tether-work/backup
 * so a failure can put everything back. A list of the paths in flight is
 * fsync'd first: after a crash, boot removes what the unfinished push added
 * and rewrites what differs from last-good. */
#include "buf.h"
#include "consumer/consumer.h"
#include "consumer/safefs.h"
#include "json.h"
#include "log.h"
#include "strmap.h"
#include "xmalloc.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define WORK ".tether-work"
#define MAX_FILE (64u << 20)

struct file_op {
	char *path;
	char *name;          /* the resource it belongs to, for messages */
	bool write;          /* else a removal */
	bool had_old;        /* the live path held something, now in backup */
	bool done;
};

struct files {
	struct consumer base;
	int rootfd;          /* OUTPUT_DIR */
	int workfd;          /* OUTPUT_DIR/.tether-work */
	char *staging;       /* its absolute path, for TETHER_STAGING */
	struct file_op *ops;
	size_t nops;
	void (*fault)(const char *point);   /* consumer_options.fault */
};

/* The content and mode of a file resource's body. */
static int file_fields(const struct res *r, char **content, size_t *len, mode_t *mode, char *err, size_t errlen)
{
	cJSON *v = json_decode(r->body, r->body_len, NULL, err, errlen);
	if (!v)
		return -1;
	const char *c = json_get_string(v, "content");
	const char *m = json_get_string(v, "mode");
	*content = xstrdup(c ? c : "");
	*len = strlen(*content);
	*mode = m ? (mode_t)strtoul(m, NULL, 8) : 0644;
	cJSON_Delete(v);
	return 0;
}

static void add_op(struct files *f, const char *path, const char *name, bool write)
{
	for (size_t i = 0; i < f->nops; i++) {
		if (strcmp(f->ops[i].path, path) == 0) {
			/* written and removed in one push: the write wins */
			if (write && !f->ops[i].write) {
				free(f->ops[i].name);
				f->ops[i].name = xstrdup(name);
			}
			f->ops[i].write = f->ops[i].write || write;
			return;
		}
	}
	f->ops = xrealloc(f->ops, (f->nops + 1) * sizeof(*f->ops));
	f->ops[f->nops] = (struct file_op){ .path = xstrdup(path), .name = xstrdup(name), .write = write };
	f->nops++;
}

/* Puts "NAME: " in front of a message. */
static void name_err(const char *name, char *err, size_t errlen)
{
	char tmp[1024];
	snprintf(tmp, sizeof(tmp), "%s", err);
	snprintf(err, errlen, "%s: %s", name, tmp);
}

static void files_finish(struct consumer *c)
{
	struct files *f = (struct files *)c;
	safefs_remove_tree(f->workfd, "staging");
	safefs_remove_tree(f->workfd, "backup");
	unlinkat(f->workfd, "inflight", 0);
	for (size_t i = 0; i < f->nops; i++) {
		free(f->ops[i].path);
		free(f->ops[i].name);
	}
	free(f->ops);
	f->ops = NULL;
	f->nops = 0;
}

static bool same_file(int rootfd, const char *path, const char *content, size_t len, mode_t mode)
{
	struct safefs_dirs dirs;
	safefs_dirs_init(&dirs, rootfd);
	bool same = safefs_same(&dirs, path, content, len, mode);
	safefs_dirs_release(&dirs);
	return same;
}

static int files_stage(struct consumer *c, const struct state *s, const struct candidate *cand, char *err,
		       size_t errlen)
{
	struct files *f = (struct files *)c;
	(void)s;
	files_finish(c);
	for (size_t i = 0; i < cand->n; i++) {
		const struct res *nr = cand->items[i].new_res, *old = cand->items[i].old;
		if (old && old->file_path && (!nr || !nr->file_path || strcmp(old->file_path, nr->file_path) != 0))
			add_op(f, old->file_path, old->name, false);
		if (!nr || !nr->file_path)
			continue;
		char *content;
		size_t len;
		mode_t mode;
		if (file_fields(nr, &content, &len, &mode, err, errlen) < 0) {
			name_err(nr->name, err, errlen);
			return -1;
		}
		/* the body changed but the file did not (an unknown field, say) */
		if (same_file(f->rootfd, nr->file_path, content, len, mode)) {
			free(content);
			continue;
		}
		char *spath = xasprintf("staging/%s", nr->file_path);
		int rc = safefs_write(f->workfd, spath, content, len, mode, err, errlen);
		free(spath);
		free(content);
		if (rc < 0) {
			name_err(nr->name, err, errlen);
			return -1;
		}
		add_op(f, nr->file_path, nr->name, true);
	}
	return f->nops ? 0 : 1;
}

static const char *files_staging_dir(struct consumer *c)
{
	return ((struct files *)c)->staging;
}

static int write_inflight(struct files *f, char *err, size_t errlen)
{
	struct buf b = BUF_INIT;
	for (size_t i = 0; i < f->nops; i++) {
		buf_puts(&b, f->ops[i].path);
		buf_putc(&b, '\n');
	}
	int rc = safefs_write(f->workfd, "inflight", b.data ? b.data : "", b.len, 0600, err, errlen);
	buf_release(&b);
	return rc;
}

static bool live_exists(int rootfd, const char *path)
{
	char err[256];
	const char *base;
	int dfd = safefs_parent(rootfd, path, false, &base, err, sizeof(err));
	if (dfd < 0)
		return false;
	struct stat st;
	bool ok = fstatat(dfd, base, &st, AT_SYMLINK_NOFOLLOW) == 0;
	close(dfd);
	return ok;
}

static int files_swap(struct consumer *c, char *err, size_t errlen)
{
	struct files *f = (struct files *)c;
	if (write_inflight(f, err, errlen) < 0)
		return -1;
	for (size_t i = 0; i < f->nops; i++) {
		struct file_op *op = &f->ops[i];
		char *backup = xasprintf("backup/%s", op->path);
		int rc = 0;
		if (live_exists(f->rootfd, op->path)) {
			rc = safefs_move(f->rootfd, op->path, f->workfd, backup, err, errlen);
			op->had_old = rc == 0;
		}
		if (rc == 0 && op->write) {
			char *staged = xasprintf("staging/%s", op->path);
			rc = safefs_move(f->workfd, staged, f->rootfd, op->path, err, errlen);
			free(staged);
		}
		free(backup);
		op->done = rc == 0 || op->had_old;
		if (rc < 0) {
			name_err(op->name, err, errlen);
			return -1;
		}
		op->done = true;
		if (i == 0 && f->fault)
			f->fault("swapping");   /* a swap half done */
	}
	for (size_t i = 0; i < f->nops; i++) {
		if (safefs_sync_parent(f->rootfd, f->ops[i].path, err, errlen) < 0) {
			name_err(f->ops[i].name, err, errlen);
			return -1;
		}
	}
	return 0;
}

/* Whether the output holds every change of cand (each file it writes,
 * with its content and mode; each path it drops gone): then the swap
 * happened, all of it. The files it writes are staged again for the
 * check. The inflight list and the backup stay, for boot, should the
 * answer be no or the check refuse. */
static int files_resume(struct consumer *c, const struct state *s, const struct candidate *cand,
			const char *gen, char *err, size_t errlen)
{
	struct files *f = (struct files *)c;
	struct strmap written;   /* the paths cand writes (borrowed keys) */
	int rc = 1;
	(void)s;
	(void)gen;
	strmap_init(&written);
	safefs_remove_tree(f->workfd, "staging");
	if (mkdirat(f->workfd, "staging", 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create '%s/%s/staging': %s", c->output_dir, WORK, strerror(errno));
		rc = -1;
		goto out;
	}
	for (size_t i = 0; i < cand->n; i++) {
		const struct res *nr = cand->items[i].new_res;
		if (nr && nr->file_path)
			*strmap_ref(&written, nr->file_path) = 1;
	}
	for (size_t i = 0; rc == 1 && i < cand->n; i++) {
		const struct res *nr = cand->items[i].new_res, *old = cand->items[i].old;
		if (old && old->file_path && !strmap_get(&written, old->file_path, NULL) &&
		    live_exists(f->rootfd, old->file_path))
			rc = 0;   /* a path it drops is still there */
		if (rc != 1 || !nr || !nr->file_path)
			continue;
		char *content;
		size_t len;
		mode_t mode;
		if (file_fields(nr, &content, &len, &mode, err, errlen) < 0) {
			name_err(nr->name, err, errlen);
			rc = -1;
			break;
		}
		if (!same_file(f->rootfd, nr->file_path, content, len, mode)) {
			rc = 0;   /* a file it writes is not (all) there */
		} else {
			char *spath = xasprintf("staging/%s", nr->file_path);
			if (safefs_write(f->workfd, spath, content, len, mode, err, errlen) < 0) {
				name_err(nr->name, err, errlen);
				rc = -1;
			}
			free(spath);
		}
		free(content);
	}
out:
	strmap_release(&written);
	if (rc != 1)
		safefs_remove_tree(f->workfd, "staging");
	return rc;
}

static int files_revert(struct consumer *c, char *err, size_t errlen)
{
	struct files *f = (struct files *)c;
	int rc = 0;
	for (size_t i = f->nops; i-- > 0;) {
		struct file_op *op = &f->ops[i];
		if (!op->done)
			continue;
		char e2[256];
		if (op->write && safefs_unlink(f->rootfd, op->path, e2, sizeof(e2)) < 0) {
			snprintf(err, errlen, "revert: %s", e2);
			rc = -1;
		}
		if (op->had_old) {
			char *backup = xasprintf("backup/%s", op->path);
			if (safefs_move(f->workfd, backup, f->rootfd, op->path, e2, sizeof(e2)) < 0) {
				snprintf(err, errlen, "revert: %s", e2);
				rc = -1;
			}
			free(backup);
		}
		safefs_sync_parent(f->rootfd, op->path, e2, sizeof(e2));
		op->done = false;
	}
	return rc;
}

/* ---- boot ------------------------------------------------------------------
 *
 * Boot makes the output match last-good, and on a restart it usually
 * already does: each file is compared (type, size and mode first, then the
 * bytes, all read ahead at once) and one that matches is neither written
 * nor fsync'd. What differs
 * or is missing is written as a batch (safefs_batch): every file to its
 * temp name beside its target, then one syncfs(2) makes them all durable,
 * then one rename per file puts it in place, then a second syncfs makes the
 * renames (and any directory made for them) durable. (A batch of 16 files
 * or fewer that made no directory fsyncs each file, then each directory,
 * instead of syncing the whole file system.) Files that are not a
 * resource's are not ours and are left alone, as a push leaves them.
 *
 * The layout is the one pushes use: the files themselves at their paths
 * (no generations, no symlink: a consumer reads each file on its own), so
 * the switch is per file, a rename. Why that is crash-safe:
 *  - no file is torn: a path is renamed over only after the bytes behind
 *    it are durable (the first syncfs, or the file's fsync), so after a
 *    crash it holds its old bytes or all of the new ones;
 *  - boot returns (the agent says READY, logs "node N at version V", then
 *    applies pushes) only after the second syncfs (or the directories'
 *    fsyncs), so what it reports in place survives a crash;
 *  - a crash in between leaves some paths old or missing and .tether-tmp-*
 *    files beside them; the next boot starts from the same last-good (only
 *    a push changes it, and pushes come after boot), finds those paths
 *    different and writes them again over the same temp names;
 *  - syncfs reports write-back errors since Linux 5.8; one per file system
 *    written (a mount point under the output directory gets its own).
 * One syncfs instead of two fsyncs per file is what makes a rebuild fast:
 * 1,000 files in 45-75 ms instead of 0.5-1.9 s, start to READY
 * (docs/BENCHMARKS.md, "Boot"). */

struct boot_file {
	const char *path;    /* first: safefs_cmp_path sorts these */
	const struct res *r;
};

struct boot_list {
	struct boot_file *v;
	size_t n, cap;
};

static void collect_file(void *ctx, const struct res *r)
{
	struct boot_list *l = ctx;
	if (!r->file_path)
		return;
	if (l->n == l->cap) {
		l->cap = l->cap ? 2 * l->cap : 256;
		l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
	}
	l->v[l->n++] = (struct boot_file){ r->file_path, r };
}

/* Asks the kernel to read every file of the list at once (readahead), so
 * that after a reboot, when none of them is cached, the comparison waits
 * for the disk about once instead of once per file: with 1,000 files cold,
 * 20 ms instead of 75-140 ms here; warm, it costs 1-2 ms. */
static void prefetch(struct files *f, const struct boot_list *l)
{
	struct safefs_dirs dirs;
	safefs_dirs_init(&dirs, f->rootfd);
	for (size_t i = 0; i < l->n; i++) {
		const char *base;
		char e[256];
		int dfd = safefs_dirs_parent(&dirs, l->v[i].path, false, &base, e, sizeof(e));
		if (dfd < 0)
			continue;
		int fd = openat(dfd, base, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		if (fd < 0)
			continue;
		posix_fadvise(fd, 0, 0, POSIX_FADV_WILLNEED);
		close(fd);
	}
	safefs_dirs_release(&dirs);
}

/* Compares every file of s with the output and writes what differs in one
 * batch; *written gets how many. */
static int boot_files(struct files *f, const struct state *s, size_t *written, size_t *kept, char *err,
		      size_t errlen)
{
	struct boot_list l = { NULL, 0, 0 };
	struct safefs_dirs dirs;
	struct safefs_batch *batch = safefs_batch_new(f->rootfd);
	int rc = -1;
	safefs_dirs_init(&dirs, f->rootfd);
	state_each(s, collect_file, &l);
	/* by directory: each is walked once */
	if (l.n)   /* qsort(NULL, 0, ...) is undefined */
		qsort(l.v, l.n, sizeof(*l.v), safefs_cmp_path);
	prefetch(f, &l);
	*kept = 0;
	for (size_t i = 0; i < l.n; i++) {
		char *content;
		size_t len;
		mode_t mode;
		if (file_fields(l.v[i].r, &content, &len, &mode, err, errlen) < 0) {
			name_err(l.v[i].r->name, err, errlen);
			goto out;
		}
		int wrc = 0;
		if (safefs_same(&dirs, l.v[i].path, content, len, mode))
			(*kept)++;
		else
			wrc = safefs_batch_write(batch, l.v[i].path, content, len, mode, err, errlen);
		free(content);
		if (wrc < 0) {
			name_err(l.v[i].r->name, err, errlen);
			goto out;
		}
	}
	safefs_dirs_release(&dirs);
	*written = safefs_batch_count(batch);
	if (safefs_batch_commit(batch, err, errlen) < 0)
		goto out;
	rc = 0;
out:
	safefs_dirs_release(&dirs);
	safefs_batch_free(batch);
	free(l.v);
	return rc;
}

static int files_boot(struct consumer *c, const struct state *s, char *err, size_t errlen)
{
	struct files *f = (struct files *)c;
	/* an unfinished push: remove what it added that last-good lacks */
	size_t len;
	char *inflight = safefs_read(f->workfd, "inflight", MAX_FILE, &len, NULL);
	bool interrupted = inflight != NULL;
	if (inflight) {
		size_t removed = 0;
		for (char *line = strtok(inflight, "\n"); line; line = strtok(NULL, "\n")) {
			if (!pathindex_file_at(&s->paths, line)) {
				char e2[256];
				if (safefs_unlink(f->rootfd, line, e2, sizeof(e2)) == 0)
					removed++;
			}
		}
		log_warn("files: an interrupted push was cleaned up (%zu files it added removed)", removed);
		free(inflight);
	}
	files_finish(c);
	size_t written = 0, kept = 0;
	if (boot_files(f, s, &written, &kept, err, errlen) < 0)
		return -1;
	log_info("files: output matches version %llu (%zu files written, %zu already right)",
		 (unsigned long long)s->version, written, kept);
	return written > 0 || interrupted;
}

static void files_free(struct consumer *c)
{
	struct files *f = (struct files *)c;
	for (size_t i = 0; i < f->nops; i++) {
		free(f->ops[i].path);
		free(f->ops[i].name);
	}
	free(f->ops);
	if (f->workfd >= 0)
		close(f->workfd);
	if (f->rootfd >= 0)
		close(f->rootfd);
	free(f->staging);
	free(f->base.output_dir);
	free(f);
}

static const struct consumer_ops files_ops = {
	.name = "files",
	.boot = files_boot,
	.stage = files_stage,
	.staging_dir = files_staging_dir,
	.check = NULL,
	.generation = NULL,
	.staged_id = NULL,
	.resume = files_resume,
	.swap = files_swap,
	.revert = files_revert,
	.finish = files_finish,
	.free = files_free,
};

struct consumer *consumer_files_new(const struct consumer_options *o, char *err, size_t errlen)
{
	const char *output_dir = o->output_dir;
	if (mkdir(output_dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create output directory '%s': %s", output_dir, strerror(errno));
		return NULL;
	}
	struct files *f = xcalloc(1, sizeof(*f));
	f->base.ops = &files_ops;
	f->base.output_dir = xstrdup(output_dir);
	f->workfd = -1;
	f->fault = o->fault;
	f->rootfd = open(output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (f->rootfd < 0) {
		snprintf(err, errlen, "cannot open output directory '%s': %s", output_dir, strerror(errno));
		goto fail;
	}
	if (mkdirat(f->rootfd, WORK, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create '%s/%s': %s", output_dir, WORK, strerror(errno));
		goto fail;
	}
	f->workfd = openat(f->rootfd, WORK, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (f->workfd < 0) {
		snprintf(err, errlen, "cannot open '%s/%s': %s", output_dir, WORK, strerror(errno));
		goto fail;
	}
	if (mkdirat(f->workfd, "staging", 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create '%s/%s/staging': %s", output_dir, WORK, strerror(errno));
		goto fail;
	}
	f->staging = xasprintf("%s/%s/staging", output_dir, WORK);
	return &f->base;
fail:
	files_free(&f->base);
	return NULL;
}
