/* consumer/gen.c: the nginx and haproxy consumers. Every change renders a
 * whole generation into OUTPUT_DIR/gen-<id> (id: a hash of its content, so
 * an equal state is the same generation and needs no reload); it goes live
 * by switching the OUTPUT_DIR/current symlink with one rename, so the
 * consumer never reads a mix of two generations; swapping back is the same
 * rename. Key material goes to OUTPUT_DIR/secrets or --secrets-dir (0700;
 * a tmpfs keeps it off the disk), one file per content (0600), shared by
 * the generations that use it; it is written before the generation that
 * names it goes live, so the swap stays one rename. Temp files a crash
 * left there are removed at start. Old generations
 * and unused secrets are pruned. A generation on disk is checked before it
 * is used again (at boot: the live one), file by file against the render,
 * since its name says what it should hold, not what it holds; one that
 * differs is written again and exchanged whole (renameat2 RENAME_EXCHANGE)
 * and the proxy reloads. New files are made durable in batches
 * (safefs_batch) before anything points at them. With traffic stats the
 * renderer names the generation in its access log format: the id is
 * filled in (render_fill_gen) once the hash has made it. With haproxy's
 * runtime API (--runtime-api) a generation may go live without a reload:
 * then the proxy still serves the one it loaded (its marker and access
 * log say so), which is followed apart from current (served, what the
 * live op names) and kept on disk while it serves. */
#include "consumer/consumer.h"
#include "consumer/reload.h"
#include "consumer/render.h"
#include "consumer/checkmap.h"
#include "consumer/runcmd.h"
#include "consumer/safefs.h"
#include "json.h"
#include "log.h"
#include "util.h"
#include "xmalloc.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <errno.h>
#include <fcntl.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ID_LEN 16          /* hex digits of a generation id */
#define NAME_MAX_LEN 64

struct gen {
	struct consumer base;
	const struct renderer *rnd;
	int rootfd;
	int secretsfd;              /* secrets_dir (OUTPUT_DIR/secrets or --secrets-dir) */
	char *secrets_dir;          /* absolute */
	const struct sealed_opener *opener;   /* the core's (consumer_options) */
	char *marker;               /* NULL: none */
	char *checker;              /* nginx or haproxy binary */
	char *base_config;          /* haproxy: checked together with ours */
	char *traffic_syslog;       /* render_opts.traffic_syslog (NULL: off) */
	char *stats_socket;         /* render_opts.stats_socket (NULL: off) */
	char *admin_socket;         /* render_opts.admin_socket (NULL: off) */
	bool runtime;               /* --runtime-api: render_opts.runtime_slots */
	unsigned keep;              /* generations kept */
	char live[NAME_MAX_LEN];    /* what current points at ("" none) */
	char served[NAME_MAX_LEN];  /* what the proxy loaded last: live, or after
	                             * runtime updates an older one ("" none) */
	char prev_served[NAME_MAX_LEN]; /* served before swap */
	char staged[NAME_MAX_LEN];  /* the staged generation ("gen-<id>") */
	char staged_id[ID_LEN + 1];
	char *staged_path;          /* absolute, for TETHER_STAGING */
	bool created;               /* the staged directory is new (or was
	                             * written again: it did not hold what
	                             * its name says) */
	bool secrets_written;       /* prepare wrote a secret file */
	char prev[NAME_MAX_LEN];    /* what current pointed at before swap */
	bool swapped;
};

/* ---- the current symlink ---------------------------------------------------- */

static void read_current(struct gen *g, char *out, size_t cap)
{
	ssize_t n = readlinkat(g->rootfd, "current", out, cap - 1);
	out[n > 0 ? n : 0] = '\0';
	if (n > 0 && (strchr(out, '/') || strncmp(out, "gen-", 4) != 0))
		out[0] = '\0';   /* not one of ours */
}

/* Points current at target ("" removes it), atomically; fsyncs the dir. */
static int set_current(struct gen *g, const char *target, char *err, size_t errlen)
{
	if (!*target) {
		if (unlinkat(g->rootfd, "current", 0) < 0 && errno != ENOENT)
			goto fail;
	} else {
		unlinkat(g->rootfd, "current.tmp", 0);
		if (symlinkat(target, g->rootfd, "current.tmp") < 0 ||
		    renameat(g->rootfd, "current.tmp", g->rootfd, "current") < 0)
			goto fail;
	}
	if (fsync(g->rootfd) < 0)
		goto fail;
	return 0;
fail:
	snprintf(err, errlen, "cannot switch %s/current to '%s': %s", g->base.output_dir, target, strerror(errno));
	unlinkat(g->rootfd, "current.tmp", 0);
	return -1;
}

/* ---- rendering and writing a generation ---------------------------------------- */

static void make_id(const struct render_out *out, char id[ID_LEN + 1])
{
	crypto_generichash_state hs;
	unsigned char h[ID_LEN / 2];
	crypto_generichash_init(&hs, NULL, 0, sizeof(h));
	for (size_t i = 0; i < out->n; i++) {
		const struct render_file *f = &out->files[i];
		unsigned char meta[2] = { (unsigned char)f->secret, (unsigned char)(f->mode & 0xff) };
		crypto_generichash_update(&hs, (const unsigned char *)f->path, strlen(f->path) + 1);
		crypto_generichash_update(&hs, meta, sizeof(meta));
		crypto_generichash_update(&hs, (const unsigned char *)f->data.data, f->data.len);
		crypto_generichash_update(&hs, (const unsigned char *)"\0", 1);
	}
	crypto_generichash_final(&hs, h, sizeof(h));
	for (size_t i = 0; i < sizeof(h); i++)
		snprintf(id + 2 * i, 3, "%02x", h[i]);
}

/* Makes every secret of out present with its content and mode 0600 (named
 * by content: a file that matches is right); writes what is missing or
 * differs as one batch. Returns how many were written, or -1. */
static int write_secrets(struct gen *g, const struct render_out *out, char *err, size_t errlen)
{
	struct safefs_dirs dirs;
	struct safefs_batch *batch = safefs_batch_new(g->secretsfd);
	int rc = -1;
	safefs_dirs_init(&dirs, g->secretsfd);
	for (size_t i = 0; i < out->n; i++) {
		const struct render_file *f = &out->files[i];
		if (!f->secret)
			continue;
		int wrc = 0;
		if (!safefs_same(&dirs, f->path, f->data.data, f->data.len, 0600))
			wrc = safefs_batch_write(batch, f->path, f->data.data, f->data.len, 0600, err, errlen);
		if (wrc < 0)
			goto out;
	}
	safefs_dirs_release(&dirs);
	if (safefs_batch_commit(batch, err, errlen) < 0)
		goto out;
	rc = (int)safefs_batch_count(batch);
out:
	safefs_dirs_release(&dirs);
	safefs_batch_free(batch);
	return rc;
}

/* The check configuration: nginx needs a main file around ours. */
static void check_file(struct gen *g, const char *dir, struct render_out *out)
{
	if (g->rnd != &render_nginx)
		return;
	struct buf *b = render_add(out, "check.nginx", 0644);
	buf_printf(b, "# for `nginx -t` of this generation alone (tetherd runs it before going live)\n"
		      "error_log stderr;\nevents {}\nhttp {\n    include %s/*.conf;\n}\n", dir);
}

/* Writes the files of out (the main one with its marker, not the secrets)
 * into a new directory tmp, durable (one batch). */
static int write_files(struct gen *g, const struct render_out *out, const char *tmp, char *err, size_t errlen)
{
	safefs_remove_tree(g->rootfd, tmp);
	if (mkdirat(g->rootfd, tmp, 0755) < 0) {
		snprintf(err, errlen, "cannot create %s/%s: %s", g->base.output_dir, tmp, strerror(errno));
		return -1;
	}
	struct safefs_batch *batch = safefs_batch_new(g->rootfd);
	int rc = 0;
	for (size_t i = 0; rc == 0 && i < out->n; i++) {
		const struct render_file *f = &out->files[i];
		if (f->secret)
			continue;
		char *path = xasprintf("%s/%s", tmp, f->path);
		rc = safefs_batch_write(batch, path, f->data.data, f->data.len, f->mode, err, errlen);
		free(path);
	}
	if (rc == 0)
		rc = safefs_batch_commit(batch, err, errlen);
	safefs_batch_free(batch);
	return rc;
}

/* Writes the files of out as gen-<id> (name): into name.tmp, then one
 * rename puts the whole directory in place. */
static int write_generation(struct gen *g, struct render_out *out, const char *name, char *err, size_t errlen)
{
	char tmp[NAME_MAX_LEN + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	if (write_files(g, out, tmp, err, errlen) < 0)
		goto fail;
	if (renameat(g->rootfd, tmp, g->rootfd, name) < 0 || fsync(g->rootfd) < 0) {
		snprintf(err, errlen, "cannot put %s/%s in place: %s", g->base.output_dir, name, strerror(errno));
		goto fail;
	}
	return 0;
fail:
	safefs_remove_tree(g->rootfd, tmp);
	return -1;
}

/* ---- checking a generation that is already on disk ------------------------------ */

/* Entries under dfd that are not directories, counted down the tree
 * (symlinks not followed); -1 when it cannot be read. Closes dfd. */
static long count_files(int dfd)
{
	DIR *d = fdopendir(dfd);
	if (!d) {
		close(dfd);
		return -1;
	}
	long n = 0;
	struct dirent *de;
	while (n >= 0 && (de = readdir(d)) != NULL) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		int sub = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
		if (sub < 0) {
			n++;
			continue;
		}
		long k = count_files(sub);
		n = k < 0 ? -1 : n + k;
	}
	closedir(d);
	return n;
}

/* Whether the generation directory name holds the files of out, each with
 * its bytes and mode, and nothing else. A generation is named by a hash of
 * what it should hold, so a name present says nothing about a file lost or
 * changed under it since; this looks. */
static bool generation_intact(struct gen *g, const char *name, const struct render_out *out)
{
	struct safefs_dirs dirs;
	long want = 0;
	bool ok = true;
	safefs_dirs_init(&dirs, g->rootfd);
	for (size_t i = 0; ok && i < out->n; i++) {
		const struct render_file *f = &out->files[i];
		if (f->secret)
			continue;
		want++;
		char *path = xasprintf("%s/%s", name, f->path);
		ok = safefs_same(&dirs, path, f->data.data, f->data.len, f->mode);
		free(path);
	}
	safefs_dirs_release(&dirs);
	if (!ok)
		return false;
	int fd = openat(g->rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	return fd >= 0 && count_files(fd) == want;
}

/* replace_generation's fallback: each file of out that differs rewritten
 * (temp, fsync, rename), then every other entry of the directory removed.
 * Renderers write flat generations (file names, no directories). */
static int repair_in_place(struct gen *g, const struct render_out *out, const char *name, char *err, size_t errlen)
{
	struct safefs_dirs dirs;
	int rc = 0;
	safefs_dirs_init(&dirs, g->rootfd);
	for (size_t i = 0; rc == 0 && i < out->n; i++) {
		const struct render_file *f = &out->files[i];
		if (f->secret)
			continue;
		char *path = xasprintf("%s/%s", name, f->path);
		if (!safefs_same(&dirs, path, f->data.data, f->data.len, f->mode))
			rc = safefs_write(g->rootfd, path, f->data.data, f->data.len, f->mode, err, errlen);
		free(path);
	}
	safefs_dirs_release(&dirs);
	if (rc < 0)
		return -1;
	DIR *d = opendir_at(g->rootfd, name);
	if (!d) {
		snprintf(err, errlen, "cannot read %s/%s: %s", g->base.output_dir, name, strerror(errno));
		return -1;
	}
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		bool ours = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0;
		for (size_t i = 0; !ours && i < out->n; i++)
			ours = !out->files[i].secret && strcmp(out->files[i].path, de->d_name) == 0;
		if (ours)
			continue;
		char *path = xasprintf("%s/%s", name, de->d_name);
		safefs_remove_tree(g->rootfd, path);
		free(path);
	}
	closedir(d);
	int fd = openat(g->rootfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0 || fsync(fd) < 0) {
		snprintf(err, errlen, "cannot fsync %s/%s: %s", g->base.output_dir, name, strerror(errno));
		if (fd >= 0)
			close(fd);
		return -1;
	}
	close(fd);
	return 0;
}

/* Puts a fresh copy of out in place of the generation name, which is on
 * disk but does not hold what it should (and may be live). The copy is
 * written as name.tmp and exchanged with name in one renameat2
 * (RENAME_EXCHANGE): whoever follows current sees the old directory or the
 * new one, never a mix and never nothing. Where the file system cannot
 * exchange, each file that differs is replaced in place (each atomically)
 * and what does not belong is removed. */
static int replace_generation(struct gen *g, struct render_out *out, const char *name, char *err, size_t errlen)
{
	char tmp[NAME_MAX_LEN + 8];
	snprintf(tmp, sizeof(tmp), "%s.tmp", name);
	if (write_files(g, out, tmp, err, errlen) < 0) {
		safefs_remove_tree(g->rootfd, tmp);
		return -1;
	}
	if (renameat2(g->rootfd, tmp, g->rootfd, name, RENAME_EXCHANGE) == 0) {
		int rc = fsync(g->rootfd);
		int e = errno;
		safefs_remove_tree(g->rootfd, tmp);   /* the old copy, now */
		if (rc < 0) {
			snprintf(err, errlen, "cannot put %s/%s in place: %s", g->base.output_dir, name, strerror(e));
			return -1;
		}
		return 0;
	}
	if (errno != EINVAL && errno != ENOSYS && errno != EOPNOTSUPP) {
		snprintf(err, errlen, "cannot put %s/%s in place: %s", g->base.output_dir, name, strerror(errno));
		safefs_remove_tree(g->rootfd, tmp);
		return -1;
	}
	safefs_remove_tree(g->rootfd, tmp);
	return repair_in_place(g, out, name, err, errlen);
}

static bool dir_exists(int rootfd, const char *name)
{
	struct stat st;
	return fstatat(rootfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* Renders s (with c) and makes sure its generation exists on disk. Sets
 * g->staged*, g->created. Returns 0, -1 on an I/O error, -2 when the state
 * cannot be rendered. */
static int prepare(struct gen *g, const struct state *s, const struct candidate *c, char *err, size_t errlen)
{
	struct render_opts o = { .secrets_dir = g->secrets_dir, .marker = g->marker,
				 .traffic_syslog = g->traffic_syslog, .stats_socket = g->stats_socket,
				 .admin_socket = g->admin_socket, .runtime_slots = g->runtime, .opener = g->opener };
	struct render_out out = { 0 };
	int rc = -1;
	if (g->rnd->render(s, c, &o, &out, err, errlen) < 0) {
		rc = -2;   /* a state this consumer cannot express: final */
		goto out;
	}
	make_id(&out, g->staged_id);
	snprintf(g->staged, sizeof(g->staged), "gen-%s", g->staged_id);
	render_fill_gen(&out.files[0].data, g->staged_id);
	g->rnd->marker(&out.files[0].data, &o, g->staged_id);
	free(g->staged_path);
	g->staged_path = xasprintf("%s/%s", g->base.output_dir, g->staged);
	check_file(g, g->staged_path, &out);
	g->created = false;
	int secrets = write_secrets(g, &out, err, errlen);
	if (secrets < 0)
		goto out;
	g->secrets_written = secrets > 0;
	if (!dir_exists(g->rootfd, g->staged)) {
		if (write_generation(g, &out, g->staged, err, errlen) < 0)
			goto out;
		g->created = true;
	} else if (!generation_intact(g, g->staged, &out)) {
		/* a file of it was lost or changed since it was written */
		log_warn("%s: %s/%s does not hold what it should; writing it again", g->rnd->name,
			 g->base.output_dir, g->staged);
		if (replace_generation(g, &out, g->staged, err, errlen) < 0)
			goto out;
		g->created = true;
	}
	rc = 0;
out:
	render_out_release(&out);
	return rc;
}

/* ---- pruning ------------------------------------------------------------------ */

struct genent {
	char name[NAME_MAX_LEN];
	struct timespec mtime;
};

static int cmp_newest(const void *a, const void *b)
{
	const struct genent *x = a, *y = b;
	if (x->mtime.tv_sec != y->mtime.tv_sec)
		return x->mtime.tv_sec < y->mtime.tv_sec ? 1 : -1;
	if (x->mtime.tv_nsec != y->mtime.tv_nsec)
		return x->mtime.tv_nsec < y->mtime.tv_nsec ? 1 : -1;
	return strcmp(x->name, y->name);
}

/* Start: a crash between a secret's temp file and the batch's rename
 * left it (plaintext, 0600, a name never used again): removed. No batch
 * runs yet. */
static void prune_temps(struct gen *g)
{
	DIR *d = opendir_at(g->secretsfd, ".");
	if (!d)
		return;
	struct dirent *de;
	while ((de = readdir(d)) != NULL)
		if (strncmp(de->d_name, ".tether-tmp-", 12) == 0 && unlinkat(dirfd(d), de->d_name, 0) == 0)
			log_info("%s: removed %s, left by a crash", g->secrets_dir, de->d_name);
	closedir(d);
}

/* Keeps the live generation, the one the proxy serves (after runtime
 * updates: the one it loaded) and the newest others up to g->keep in all;
 * drops every secret no kept generation's configuration names. */
static void prune(struct gen *g)
{
	DIR *d = opendir_at(g->rootfd, ".");
	if (!d)
		return;
	struct genent *v = NULL;
	size_t n = 0;
	struct dirent *de;
	while ((de = readdir(d)) != NULL) {
		struct stat st;
		if (strncmp(de->d_name, "gen-", 4) != 0 || strlen(de->d_name) >= NAME_MAX_LEN ||
		    fstatat(g->rootfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode))
			continue;
		v = xrealloc(v, (n + 1) * sizeof(*v));
		snprintf(v[n].name, sizeof(v[n].name), "%s", de->d_name);
		v[n].mtime = st.st_mtim;
		n++;
	}
	closedir(d);
	if (n > 1)
		qsort(v, n, sizeof(*v), cmp_newest);
	struct buf kept = BUF_INIT;   /* configuration text of what stays */
	unsigned left = g->keep;
	for (size_t i = 0; i < n; i++) {
		bool live = strcmp(v[i].name, g->live) == 0 || strcmp(v[i].name, g->served) == 0;
		bool tmp = strstr(v[i].name, ".tmp") != NULL;
		if (!tmp && (live || left > 1)) {
			if (!live)
				left--;
			char *conf = xasprintf("%s/%s", v[i].name, g->rnd == &render_nginx ? "tether.conf" : "tether.cfg");
			size_t len;
			char *text = safefs_read(g->rootfd, conf, 64u << 20, &len, NULL);
			if (text)
				buf_append(&kept, text, len);
			free(text);
			free(conf);
			continue;
		}
		safefs_remove_tree(g->rootfd, v[i].name);
	}
	free(v);
	d = opendir_at(g->secretsfd, ".");
	if (d) {
		while ((de = readdir(d)) != NULL) {
			if (de->d_name[0] == '.' || (kept.data && strstr(kept.data, de->d_name)))
				continue;
			unlinkat(dirfd(d), de->d_name, 0);
		}
		closedir(d);
	}
	buf_release(&kept);
}

/* ---- the generation served ------------------------------------------------------ */

/* At boot: what the proxy serves. A reload follows (reloading), or without
 * the runtime API the proxy serves what current points at (or reads it
 * when it starts). With it, after runtime updates the proxy may still run
 * an older generation it loaded, with the live one's servers: its marker
 * says which (one quick question; no answer: it is not running, and reads
 * current when it starts). */
static void served_at_boot(struct gen *g, bool reloading)
{
	snprintf(g->served, sizeof(g->served), "%s", g->live);
	if (reloading || !g->runtime || !g->marker)
		return;
	char id[64];
	if (reload_marker_read(g->marker, 1.0, id, sizeof(id)) < 0 || strlen(id) != ID_LEN ||
	    strspn(id, "0123456789abcdef") != ID_LEN || strcmp(id, g->live + 4) == 0)
		return;
	snprintf(g->served, sizeof(g->served), "gen-%s", id);
	log_info("%s: it serves generation %s, loaded before runtime updates made %s live", g->rnd->name, id,
		 g->live);
}

/* ---- the consumer ops ------------------------------------------------------------ */

static int gen_boot(struct consumer *c, const struct state *s, char *err, size_t errlen)
{
	struct gen *g = (struct gen *)c;
	unlinkat(g->rootfd, "current.tmp", 0);
	read_current(g, g->live, sizeof(g->live));
	if (prepare(g, s, NULL, err, errlen) < 0)
		return -1;
	if (strcmp(g->staged, g->live) == 0) {
		/* the live generation, checked file by file (prepare): rewritten
		 * when it was not intact, and then the proxy reloads */
		bool repaired = g->created || g->secrets_written;
		log_info("%s: %s/current %s version %llu (%s)", g->rnd->name, c->output_dir,
			 repaired ? "repaired: serves" : "already serves", (unsigned long long)s->version, g->live);
		served_at_boot(g, repaired);
		prune(g);
		return repaired;
	}
	if (set_current(g, g->staged, err, errlen) < 0)
		return -1;
	log_info("%s: %s/current now %s (version %llu)", g->rnd->name, c->output_dir, g->staged,
		 (unsigned long long)s->version);
	snprintf(g->live, sizeof(g->live), "%s", g->staged);
	served_at_boot(g, true);
	prune(g);
	return 1;
}

/* ---- addresses other processes hold ------------------------------------------ */

struct addr_ctx {
	const char *addr;   /* "127.0.0.1:8080" */
	bool used;
};

static void used_by_listener(void *ctx, const struct res *r)
{
	struct addr_ctx *a = ctx;
	if (a->used || resource_type_of(r->name) != RES_LISTENER)
		return;
	char err[64], have[80];
	cJSON *v = json_decode(r->body, r->body_len, NULL, err, sizeof(err));
	if (!v)
		return;
	render_listen_addr(v, have, sizeof(have));
	a->used = strcmp(have, a->addr) == 0;
	cJSON_Delete(v);
}

/* A listener on an address no listener of the live state has: nginx -t and
 * haproxy -c do not bind, and a reload that cannot bind fails after the
 * switch (haproxy even stops accepting for a moment). Try the bind first:
 * an address another process holds is refused before anything goes live. */
static int check_new_addresses(const struct state *s, const struct candidate *cand, char *err, size_t errlen)
{
	for (size_t i = 0; i < cand->n; i++) {
		const struct res *r = cand->items[i].new_res;
		if (!r || resource_type_of(r->name) != RES_LISTENER)
			continue;
		char e[64], addr[80];
		cJSON *v = json_decode(r->body, r->body_len, NULL, e, sizeof(e));
		if (!v)
			continue;
		render_listen_addr(v, addr, sizeof(addr));
		const char *ip = json_get_string(v, "address");
		const cJSON *port = cJSON_GetObjectItemCaseSensitive(v, "port");
		struct addr_ctx a = { addr, false };
		state_each(s, used_by_listener, &a);
		union {
			struct sockaddr sa;
			struct sockaddr_in in;
			struct sockaddr_in6 in6;
		} sa;
		memset(&sa, 0, sizeof(sa));
		socklen_t len = sizeof(sa.in);
		sa.in.sin_family = AF_INET;
		sa.in.sin_port = htons((uint16_t)(cJSON_IsNumber(port) ? port->valuedouble : 0));
		if (ip && inet_pton(AF_INET6, ip, &sa.in6.sin6_addr) == 1) {
			uint16_t p = sa.in.sin_port;
			struct in6_addr a6 = sa.in6.sin6_addr;
			memset(&sa, 0, sizeof(sa));
			sa.in6.sin6_family = AF_INET6;
			sa.in6.sin6_port = p;
			sa.in6.sin6_addr = a6;
			len = sizeof(sa.in6);
		} else if (ip && inet_pton(AF_INET, ip, &sa.in.sin_addr) != 1) {
			cJSON_Delete(v);
			continue;
		}
		cJSON_Delete(v);
		if (a.used)
			continue;
		int fd = socket(sa.sa.sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
		int one = 1;
		if (fd < 0)
			continue;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		int rc = bind(fd, &sa.sa, len);
		int e2 = errno;
		close(fd);
		if (rc < 0 && e2 == EADDRINUSE) {
			snprintf(err, errlen, "%s: %s is already in use by another process", r->name, addr);
			return -1;
		}
	}
	return 0;
}

static int gen_stage(struct consumer *c, const struct state *s, const struct candidate *cand, char *err,
		     size_t errlen)
{
	struct gen *g = (struct gen *)c;
	if (check_new_addresses(s, cand, err, errlen) < 0)
		return -2;
	int rc = prepare(g, s, cand, err, errlen);
	if (rc < 0)
		return rc;
	/* an equal render is the same generation: nothing to check or reload
	 * (unless prepare found it damaged and wrote it again) */
	return strcmp(g->staged, g->live) == 0 && !g->created && !g->secrets_written ? 1 : 0;
}

static const char *gen_staging_dir(struct consumer *c)
{
	return ((struct gen *)c)->staged_path;
}

static const char *gen_generation(struct consumer *c)
{
	struct gen *g = (struct gen *)c;
	return g->marker ? g->staged_id : NULL;
}

static const char *gen_live(struct consumer *c)
{
	struct gen *g = (struct gen *)c;
	return strncmp(g->served, "gen-", 4) == 0 ? g->served + 4 : NULL;
}

static const char *gen_staged_id(struct consumer *c)
{
	struct gen *g = (struct gen *)c;
	return g->staged[0] ? g->staged_id : NULL;
}

/* The live generation is gen-<gen> and is what this agent renders of s
 * with cand (checked file by file, repaired when it was not intact): then
 * it is staged as it was before the swap. */
static int gen_resume(struct consumer *c, const struct state *s, const struct candidate *cand,
		      const char *gen, char *err, size_t errlen)
{
	struct gen *g = (struct gen *)c;
	char want[NAME_MAX_LEN];
	unlinkat(g->rootfd, "current.tmp", 0);
	read_current(g, g->live, sizeof(g->live));
	snprintf(g->served, sizeof(g->served), "%s", g->live);   /* the resumed apply reloads onto it */
	snprintf(want, sizeof(want), "gen-%s", gen ? gen : "");
	if (!gen || !*gen || strcmp(g->live, want) != 0)
		return 0;   /* the swap did not happen (or was put back) */
	if (prepare(g, s, cand, err, errlen) < 0) {
		g->staged[0] = '\0';
		return -1;
	}
	if (strcmp(g->staged, g->live) != 0) {
		/* another renderer (an upgrade) makes another generation of it:
		 * not the one that went live */
		log_warn("%s: version %llu renders as %s now, not as the live %s", g->rnd->name,
			 (unsigned long long)cand->version, g->staged, g->live);
		if (g->created)
			safefs_remove_tree(g->rootfd, g->staged);
		g->created = false;
		g->staged[0] = '\0';
		return 0;
	}
	return 1;
}

/* Keeps only the [ALERT] lines of haproxy's output (when there are any):
 * its notices are its version and path. */
static void haproxy_alerts(char *out)
{
	if (!strstr(out, "[ALERT]"))
		return;
	char *w = out;
	for (char *line = out; *line;) {
		char *nl = strchr(line, '\n');
		size_t len = nl ? (size_t)(nl - line) + 1 : strlen(line);
		if (strncmp(line, "[ALERT]", 7) == 0) {
			memmove(w, line, len);
			w += len;
		}
		line += len;
	}
	*w = '\0';
	str_trim(out);
}

static int gen_check(struct consumer *c, double timeout_s, char *err, size_t errlen)
{
	struct gen *g = (struct gen *)c;
	char *cmd;
	/* haproxy without -q: haproxy -c -q prints nothing at all on an error */
	if (g->rnd == &render_nginx)
		cmd = xasprintf("'%s' -t -q -p '%s' -e stderr -c '%s/check.nginx'", g->checker, g->staged_path,
				g->staged_path);
	else if (g->base_config)
		cmd = xasprintf("'%s' -c -f '%s' -f '%s/tether.cfg'", g->checker, g->base_config, g->staged_path);
	else
		cmd = xasprintf("'%s' -c -f '%s/tether.cfg'", g->checker, g->staged_path);
	struct runcmd_result res;
	int rc = runcmd(cmd, NULL, timeout_s, &res, err, errlen);
	free(cmd);
	if (rc < 0)
		return -1;
	if (res.exit_code == 0 && !res.timed_out)
		return 0;
	if (g->rnd == &render_haproxy)
		haproxy_alerts(res.output);
	char how[RUNCMD_OUTPUT_MAX + 64], what[320];
	runcmd_describe(&res, how, sizeof(how));
	/* a file it names that tether rendered from a resource: that resource
	 * and field first, then the tool's own words */
	checkmap_prefix(res.output, g->secrets_dir, what, sizeof(what));
	char file[128];
	unsigned long line;
	/* only the configuration tether rendered: another file there (an
	 * include of the operator's) is no resource's */
	if (!what[0] && checkmap_file_line(res.output, g->staged_path, file, sizeof(file), &line) &&
	    strcmp(file, g->rnd == &render_nginx ? "tether.conf" : "tether.cfg") == 0) {
		char *path = xasprintf("%s/%s", g->staged_path, file);
		size_t len;
		char *conf = read_file_limited(path, 64u << 20, &len);
		if (conf)
			checkmap_owner(conf, line, what, sizeof(what));
		free(conf);
		free(path);
	}
	snprintf(err, errlen, "%s%s refused the new configuration (%.3000s)", what, g->checker, how);
	return -1;
}

static int gen_swap(struct consumer *c, char *err, size_t errlen)
{
	struct gen *g = (struct gen *)c;
	read_current(g, g->prev, sizeof(g->prev));
	if (set_current(g, g->staged, err, errlen) < 0)
		return -1;
	g->swapped = true;
	snprintf(g->live, sizeof(g->live), "%s", g->staged);
	/* a reload follows (unless no_reload says otherwise) */
	snprintf(g->prev_served, sizeof(g->prev_served), "%s", g->served);
	snprintf(g->served, sizeof(g->served), "%s", g->live);
	return 0;
}

static int gen_revert(struct consumer *c, char *err, size_t errlen)
{
	struct gen *g = (struct gen *)c;
	if (!g->swapped)
		return 0;
	if (set_current(g, g->prev, err, errlen) < 0)
		return -1;
	snprintf(g->live, sizeof(g->live), "%s", g->prev);
	snprintf(g->served, sizeof(g->served), "%s", g->live);   /* reloaded onto, next */
	g->swapped = false;
	return 0;
}

static void gen_no_reload(struct consumer *c)
{
	struct gen *g = (struct gen *)c;
	if (g->swapped)
		snprintf(g->served, sizeof(g->served), "%s", g->prev_served);
}

static void gen_finish(struct consumer *c)
{
	struct gen *g = (struct gen *)c;
	/* a generation that did not go live (or was reverted) is not kept */
	if (g->created && strcmp(g->staged, g->live) != 0)
		safefs_remove_tree(g->rootfd, g->staged);
	if (g->swapped)
		prune(g);
	g->created = false;
	g->swapped = false;
	g->staged[0] = '\0';
}

static void gen_free(struct consumer *c)
{
	struct gen *g = (struct gen *)c;
	if (g->rootfd >= 0)
		close(g->rootfd);
	if (g->secretsfd >= 0)
		close(g->secretsfd);
	free(g->secrets_dir);
	free(g->marker);
	free(g->checker);
	free(g->base_config);
	free(g->traffic_syslog);
	free(g->stats_socket);
	free(g->admin_socket);
	free(g->staged_path);
	free(g->base.output_dir);
	free(g);
}

static const struct consumer_ops gen_ops = {
	.name = "generations",
	.boot = gen_boot,
	.stage = gen_stage,
	.staging_dir = gen_staging_dir,
	.check = gen_check,
	.generation = gen_generation,
	.live = gen_live,
	.staged_id = gen_staged_id,
	.resume = gen_resume,
	.swap = gen_swap,
	.revert = gen_revert,
	.no_reload = gen_no_reload,
	.finish = gen_finish,
	.free = gen_free,
};

struct consumer *consumer_gen_new(const struct consumer_options *o, char *err, size_t errlen)
{
	bool nginx = strcmp(o->consumer, "nginx") == 0;
	if (o->output_dir[0] != '/') {
		snprintf(err, errlen, "output-dir must be an absolute path for the %s consumer (its configuration "
			 "names files in it)", o->consumer);
		return NULL;
	}
	if (mkdir(o->output_dir, 0755) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create output directory '%s': %s", o->output_dir, strerror(errno));
		return NULL;
	}
	struct gen *g = xcalloc(1, sizeof(*g));
	g->base.ops = &gen_ops;
	g->base.output_dir = xstrdup(o->output_dir);
	g->rnd = nginx ? &render_nginx : &render_haproxy;
	g->secrets_dir = o->secrets_dir ? xstrdup(o->secrets_dir) : xasprintf("%s/secrets", o->output_dir);
	g->secretsfd = -1;
	g->marker = o->marker && strcmp(o->marker, "off") != 0 ? xstrdup(o->marker) : NULL;
	g->checker = xstrdup(nginx ? o->nginx : o->haproxy);
	g->base_config = o->base_config ? xstrdup(o->base_config) : NULL;
	g->traffic_syslog = o->traffic_syslog ? xstrdup(o->traffic_syslog) : NULL;
	g->stats_socket = o->stats_socket ? xstrdup(o->stats_socket) : NULL;
	g->admin_socket = o->admin_socket ? xstrdup(o->admin_socket) : NULL;
	g->runtime = o->runtime_api && !nginx;
	g->opener = o->opener;
	g->keep = o->generations ? (unsigned)o->generations : 3;
	g->rootfd = open(o->output_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (g->rootfd < 0) {
		snprintf(err, errlen, "cannot open output directory '%s': %s", o->output_dir, strerror(errno));
		gen_free(&g->base);
		return NULL;
	}
	/* its parents as needed (0755: a tmpfs's /run/tetherd), itself 0700 */
	for (char *p = strchr(g->secrets_dir + 1, '/'); p; p = strchr(p + 1, '/')) {
		*p = '\0';
		int rc = mkdir(g->secrets_dir, 0755);
		*p = '/';
		if (rc < 0 && errno != EEXIST)
			break;
	}
	if (mkdir(g->secrets_dir, 0700) < 0 && errno != EEXIST) {
		snprintf(err, errlen, "cannot create the secrets directory '%s': %s", g->secrets_dir, strerror(errno));
		gen_free(&g->base);
		return NULL;
	}
	g->secretsfd = open(g->secrets_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (g->secretsfd < 0) {
		snprintf(err, errlen, "cannot open the secrets directory '%s': %s", g->secrets_dir, strerror(errno));
		gen_free(&g->base);
		return NULL;
	}
	prune_temps(g);
	return &g->base;
}
