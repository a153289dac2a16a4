/* hapstats.c: the integration tests' handle on agent/traffic/haproxy_stats.c and
 * the haproxy renderer, before tetherd carries them (t0952):
 *   hapstats read SOCKET [TIMEOUT]   haproxy_stats_read: the traffic as JSON
 *                                    on stdout, or the error on stderr (exit 1)
 *   hapstats declared BASE SOCKET    exit 0 when BASE declares the socket, 1 not
 *   hapstats render PUSH OUT [--stats-socket P] [--syslog ADDR] [--marker ADDR]
 *                                    [--gen ID]
 *                                    renders the full push in file PUSH (JSON)
 *                                    with render_haproxy into OUT (the main
 *                                    file; the marker and the generation's id
 *                                    filled in as the agent does) */
#include "buf.h"
#include "traffic/haproxy_stats.h"
#include "state/push.h"
#include "consumer/render.h"
#include "state/state.h"
#include "traffic.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int usage(void)
{
	fprintf(stderr, "usage: hapstats read SOCKET [TIMEOUT] | declared BASE SOCKET |\n"
			"       render PUSH OUT [--stats-socket P] [--syslog ADDR] [--marker ADDR] [--gen ID]\n");
	return 2;
}

static int cmd_read(int argc, char **argv)
{
	double timeout = argc > 3 ? atof(argv[3]) : 2;
	struct traffic t;
	traffic_init(&t);
	char err[512];
	if (haproxy_stats_read(argv[2], timeout, &t, err, sizeof(err)) < 0) {
		fprintf(stderr, "hapstats: %s\n", err);
		traffic_release(&t);
		return 1;
	}
	struct buf b = BUF_INIT;
	traffic_to_json(&t, &b);
	printf("%s\n", b.data);
	buf_release(&b);
	traffic_release(&t);
	return 0;
}

static int cmd_render(int argc, char **argv)
{
	struct render_opts o = { .secrets_dir = "/nonexistent" };
	const char *gen = "g1";
	for (int i = 4; i + 1 < argc; i += 2) {
		if (strcmp(argv[i], "--stats-socket") == 0)
			o.stats_socket = argv[i + 1];
		else if (strcmp(argv[i], "--syslog") == 0)
			o.traffic_syslog = argv[i + 1];
		else if (strcmp(argv[i], "--marker") == 0)
			o.marker = argv[i + 1];
		else if (strcmp(argv[i], "--gen") == 0)
			gen = argv[i + 1];
		else
			return usage();
	}
	FILE *f = fopen(argv[2], "r");
	if (!f) {
		perror(argv[2]);
		return 1;
	}
	struct buf text = BUF_INIT;
	char chunk[4096];
	size_t n;
	while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
		buf_append(&text, chunk, n);
	fclose(f);
	char err[512];
	struct push p;
	struct state s;
	struct candidate c;
	state_init(&s);
	if (push_decode(text.data ? text.data : "", text.len, NULL, &p, err, sizeof(err)) < 0 ||
	    candidate_build(&s, &p, 0, &c, err, sizeof(err)) < 0) {
		fprintf(stderr, "hapstats: %s\n", err);
		return 1;
	}
	push_release(&p);
	state_commit(&s, &c);
	candidate_release(&c);
	struct render_out out = { 0 };
	if (render_haproxy.render(&s, NULL, &o, &out, err, sizeof(err)) < 0) {
		fprintf(stderr, "hapstats: %s\n", err);
		return 1;
	}
	render_haproxy.marker(&out.files[0].data, &o, gen);
	render_fill_gen(&out.files[0].data, gen);
	f = fopen(argv[3], "w");
	if (!f || fwrite(out.files[0].data.data, 1, out.files[0].data.len, f) != out.files[0].data.len ||
	    fclose(f) != 0) {
		perror(argv[3]);
		return 1;
	}
	render_out_release(&out);
	state_release(&s);
	buf_release(&text);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc >= 3 && strcmp(argv[1], "read") == 0)
		return cmd_read(argc, argv);
	if (argc == 4 && strcmp(argv[1], "declared") == 0)
		return haproxy_stats_declared(argv[2], argv[3]) ? 0 : 1;
	if (argc >= 4 && strcmp(argv[1], "render") == 0)
		return cmd_render(argc, argv);
	return usage();
}
