/* replay.c: runs one libFuzzer target over its seed corpus without libFuzzer,
 * so `make check` replays every seed (and every saved crash) as a TAP test.
 * The target is named by the program: "replay_json" reads
 * $FUZZ_CORPUS/json/ (default: ../../tests/fuzz/corpus next to the binary).
 * Arguments, when given, are files to run instead of the corpus. */
#include "fuzz.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define REPLAY_MAX_INPUT (64u * 1024 * 1024)
#define EXIT_HARD_ERROR 99

static void *must_alloc(size_t n)
{
	void *p = malloc(n ? n : 1);
	if (!p) {
		fprintf(stderr, "replay: out of memory\n");
		exit(EXIT_HARD_ERROR);
	}
	return p;
}

static char *dup_str(const char *s)
{
	size_t n = strlen(s) + 1;
	char *d = must_alloc(n);
	memcpy(d, s, n);
	return d;
}

static char *join_path(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	char *p = must_alloc(la + 1 + lb + 1);
	memcpy(p, a, la);
	p[la] = '/';
	memcpy(p + la + 1, b, lb + 1);
	return p;
}

/* "path/to/lt-replay_json" -> "json" */
static const char *target_name(const char *argv0)
{
	const char *base = strrchr(argv0, '/');
	base = base ? base + 1 : argv0;
	if (strncmp(base, "lt-", 3) == 0)
		base += 3;
	if (strncmp(base, "replay_", 7) == 0)
		base += 7;
	return base;
}

/* The directory the binary lives in: argv[0]'s, or /proc/self/exe's. */
static char *binary_dir(const char *argv0)
{
	char exe[PATH_MAX];
	const char *path = argv0;
	if (!strchr(argv0, '/')) {
		ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
		if (n <= 0)
			return dup_str(".");
		exe[n] = '\0';
		path = exe;
	}
	char *dir = dup_str(path);
	char *slash = strrchr(dir, '/');
	if (slash == dir)
		slash[1] = '\0';
	else if (slash)
		*slash = '\0';
	return dir;
}

/* Reads a whole file into an allocation of exactly its size, so the
 * sanitizers catch a target that reads one byte past the input. */
static uint8_t *slurp(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	if (!f)
		return NULL;
	size_t cap = 4096, n = 0;
	uint8_t *tmp = must_alloc(cap);
	for (;;) {
		if (n == cap) {
			if (cap >= REPLAY_MAX_INPUT) {
				errno = EFBIG;
				goto fail;
			}
			cap *= 2;
			uint8_t *bigger = realloc(tmp, cap);
			if (!bigger)
				goto fail;
			tmp = bigger;
		}
		size_t r = fread(tmp + n, 1, cap - n, f);
		n += r;
		if (r == 0) {
			if (ferror(f))
				goto fail;
			break;
		}
	}
	fclose(f);
	uint8_t *exact = must_alloc(n);
	if (n)
		memcpy(exact, tmp, n);
	free(tmp);
	*len = n;
	return exact;
fail:;
	int e = errno;
	free(tmp);
	fclose(f);
	errno = e;
	return NULL;
}

static int cmp_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Lists the regular files of dir (no dot files), sorted bytewise. */
static char **list_corpus(const char *dir, size_t *count)
{
	DIR *d = opendir(dir);
	if (!d)
		return NULL;
	size_t n = 0, cap = 64;
	char **names = must_alloc(cap * sizeof(*names));
	struct dirent *e;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		char *path = join_path(dir, e->d_name);
		struct stat st;
		int ok = stat(path, &st) == 0 && S_ISREG(st.st_mode);
		free(path);
		if (!ok)
			continue;
		if (n == cap) {
			cap *= 2;
			char **bigger = realloc(names, cap * sizeof(*names));
			if (!bigger) {
				fprintf(stderr, "replay: out of memory\n");
				exit(EXIT_HARD_ERROR);
			}
			names = bigger;
		}
		names[n++] = dup_str(e->d_name);
	}
	closedir(d);
	qsort(names, n, sizeof(*names), cmp_names);
	*count = n;
	return names;
}

static int run_one(const char *path)
{
	size_t len = 0;
	uint8_t *data = slurp(path, &len);
	if (!data) {
		fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
		return -1;
	}
	LLVMFuzzerTestOneInput(data, len);
	free(data);
	return 0;
}

int main(int argc, char **argv)
{
	const char *name = target_name(argv[0]);

	/* explicit files: the way to reproduce one crash */
	if (argc > 1) {
		printf("1..%d\n", argc - 1);
		fflush(stdout);
		for (int i = 1; i < argc; i++) {
			if (run_one(argv[i]) < 0) {
				printf("Bail out! cannot read %s\n", argv[i]);
				return EXIT_HARD_ERROR;
			}
			printf("ok %d - %s\n", i, argv[i]);
			fflush(stdout);
		}
		return 0;
	}

	const char *root = getenv("FUZZ_CORPUS");
	char *fallback = NULL;
	if (!root || !*root) {
		char *bin = binary_dir(argv[0]);
		fallback = join_path(bin, "../../tests/fuzz/corpus");
		free(bin);
		root = fallback;
	}
	char *dir = join_path(root, name);
	size_t n = 0;
	char **files = list_corpus(dir, &n);
	if (!files || n == 0) {
		printf("Bail out! corpus %s is %s\n", dir, files ? "empty" : "missing");
		fprintf(stderr, "replay_%s: corpus %s is %s\n", name, dir, files ? "empty" : "missing");
		return EXIT_HARD_ERROR;
	}

	/* a crash ends the output after the last good seed: the next one did it */
	printf("1..%zu\n", n);
	fflush(stdout);
	int rc = 0;
	for (size_t i = 0; i < n; i++) {
		char *path = join_path(dir, files[i]);
		if (run_one(path) < 0) {
			printf("not ok %zu - %s (unreadable)\n", i + 1, files[i]);
			rc = EXIT_HARD_ERROR;
		} else {
			printf("ok %zu - %s\n", i + 1, files[i]);
		}
		fflush(stdout);
		free(path);
		free(files[i]);
	}
	free(files);
	free(dir);
	free(fallback);
	return rc;
}
