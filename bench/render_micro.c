/* render_micro.c: what rendering costs with route and cluster options, on
 * this machine (bench/render_options.sh runs it). Builds an applied state
 * the way the agent does (push JSON, push_decode, candidate_build,
 * state_commit) of --routes routes on 10 listeners, 100 hosts, a cluster of
 * two endpoints per 10 routes; with --options every route sets every
 * option (timeout, strip_prefix, headers, websocket, retries, max_body) and
 * every cluster health and keepalive. Renders it --runs times with the
 * consumer's renderer (render_nginx or render_haproxy, the agent's code)
 * and prints key=value lines: the median and the fastest render in ms of
 * wall time, and the main file's size. Usage:
 *   bench/render_micro --consumer nginx|haproxy [--routes N] [--options] [--runs N] */
#include "buf.h"
#include "consumer/render.h"
#include "state/push.h"
#include "state/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void build(struct state *s, long routes, bool opts)
{
	struct buf b = BUF_INIT;
	long clusters = routes / 10 ? routes / 10 : 1;
	buf_puts(&b, "{\"version\":1,\"base\":0,\"full\":true,\"nonce\":\"bench\",\"removed\":[],\"upserts\":[");
	for (long c = 0; c < clusters; c++)
		buf_printf(&b, "%s{\"name\":\"cluster/c%ld\",\"version\":1,\"body\":{\"endpoints\":["
			       "{\"address\":\"10.%ld.%ld.1\",\"port\":80},{\"address\":\"10.%ld.%ld.2\",\"port\":80}]%s}}",
			   c ? "," : "", c, (c / 250) % 250, c % 250, (c / 250) % 250, c % 250,
			   opts ? ",\"health\":{\"max_fails\":3,\"fail_timeout\":30},\"keepalive\":16" : "");
	for (int l = 0; l < 10; l++)
		buf_printf(&b, ",{\"name\":\"listener/l%d\",\"version\":1,\"body\":{\"address\":\"127.0.0.1\",\"port\":%d}}", l,
			   20000 + l);
	for (long r = 0; r < routes; r++) {
		buf_printf(&b, ",{\"name\":\"route/r%ld\",\"version\":1,\"body\":{\"listener\":\"l%ld\",\"host\":\"h%ld.test\","
			       "\"path\":\"/p%ld\",\"cluster\":\"c%ld\"", r, r % 10, r % 100, r, r % clusters);
		if (opts)
			buf_puts(&b, ",\"timeout\":{\"connect\":0.5,\"read\":30,\"send\":30},\"strip_prefix\":true,"
				     "\"headers\":{\"request\":{\"set\":{\"X-Env\":\"prod\",\"X-Team\":\"a b\"},\"remove\":[\"X-Debug\"]},"
				     "\"response\":{\"set\":{\"X-Frame-Options\":\"DENY\"},\"remove\":[\"X-Powered-By\"]}},"
				     "\"websocket\":true,\"retries\":2,\"max_body\":1048576");
		buf_puts(&b, "}}");
	}
	buf_puts(&b, "]}");
	struct push p;
	struct candidate c;
	char err[512];
	state_init(s);
	if (push_decode(b.data, b.len, NULL, &p, err, sizeof(err)) < 0 || candidate_build(s, &p, 0, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "render_micro: the state: %s\n", err);
		exit(1);
	}
	state_commit(s, &c);
	candidate_release(&c);
	push_release(&p);
	buf_release(&b);
}

int main(int argc, char **argv)
{
	const char *consumer = NULL;
	long routes = 1000, runs = 11;
	bool opts = false;
	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--consumer") == 0 && i + 1 < argc)
			consumer = argv[++i];
		else if (strcmp(argv[i], "--routes") == 0 && i + 1 < argc)
			routes = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--runs") == 0 && i + 1 < argc)
			runs = strtol(argv[++i], NULL, 10);
		else if (strcmp(argv[i], "--options") == 0)
			opts = true;
		else
			consumer = NULL, i = argc;
	}
	const struct renderer *r = !consumer ? NULL : strcmp(consumer, "nginx") == 0 ? &render_nginx
						  : strcmp(consumer, "haproxy") == 0 ? &render_haproxy : NULL;
	if (!r || routes < 1 || routes > 1000000 || runs < 1 || runs > 1000) {
		fprintf(stderr, "usage: render_micro --consumer nginx|haproxy [--routes N] [--options] [--runs N]\n");
		return 2;
	}
	struct state s;
	build(&s, routes, opts);
	struct render_opts o = { .secrets_dir = "/var/lib/tether/secrets", .marker = "127.0.0.1:7099" };
	double *t = calloc((size_t)runs, sizeof(*t));
	size_t bytes = 0;
	for (long i = 0; i < runs; i++) {
		struct render_out out = { 0 };
		char err[512];
		double t0 = now_ms();
		if (r->render(&s, NULL, &o, &out, err, sizeof(err)) < 0) {
			fprintf(stderr, "render_micro: %s refused: %s\n", r->name, err);
			return 1;
		}
		t[i] = now_ms() - t0;
		bytes = out.files[0].data.len;
		render_out_release(&out);
	}
	qsort(t, (size_t)runs, sizeof(*t), cmp_double);
	printf("consumer=%s routes=%ld options=%s runs=%ld median_ms=%.2f min_ms=%.2f bytes=%zu\n", r->name, routes,
	       opts ? "all" : "none", runs, t[runs / 2], t[0], bytes);
	free(t);
	state_release(&s);
	return 0;
}
