# agent/local.mk: tetherd's sources, included by the one Makefile.am
# (each wing keeps its list here, so a move touches one file): the core
# loop at the top, then the wings below it -- consumer/ (making a state
# live), traffic/ (the live generation's traffic) and state/ (the applied
# state and pushes, which the core and the consumers share).
# ---- agent ------------------------------------------------------------------
libagent_la_SOURCES = \
	agent/agent.c agent/agent.h agent/agent_int.h agent/agent_config.c agent/agent_config.h \
	agent/ack.c agent/apply.c agent/apply_runtime.c agent/sync.c agent/fresh.c agent/fresh.h \
	agent/fault.c agent/fault.h agent/guard.c agent/guard.h agent/guardcheck.c agent/guardcheck.h \
	agent/lastgood.c agent/lastgood.h \
	agent/status.c agent/status.h \
	agent/metrics.c agent/metrics_http.c agent/metrics_http.h agent/trust.c \
	agent/seal.c agent/keyreg.c agent/wraps.c agent/wraps.h \
	agent/consumer/consumer.c agent/consumer/consumer.h agent/consumer/files.c agent/consumer/gen.c \
	agent/consumer/render.c agent/consumer/render.h agent/consumer/render_nginx.c \
	agent/consumer/render_haproxy.c agent/consumer/render_snippet.c agent/consumer/render_opts.h agent/consumer/render_opts_nginx.c \
	agent/consumer/render_opts_haproxy.c agent/consumer/drain.c agent/consumer/drain.h \
	agent/consumer/procfs.c agent/consumer/procfs.h \
	agent/consumer/reload.c agent/consumer/reload.h \
	agent/consumer/runtime.c agent/consumer/runtime.h agent/consumer/runtime_state.c \
	agent/consumer/runtime_api.c \
	agent/consumer/runcmd.c agent/consumer/runcmd.h \
	agent/consumer/checkmap.c agent/consumer/checkmap.h \
	agent/consumer/safefs.c agent/consumer/safefs.h \
	agent/traffic/report.c agent/traffic/report.h agent/traffic/auto.c agent/traffic/auto.h \
	agent/traffic/syslog.c agent/traffic/syslog.h agent/traffic/count.c agent/traffic/count.h \
	agent/traffic/haproxy_answer.c agent/traffic/haproxy_answer.h \
	agent/traffic/haproxy_stats.c agent/traffic/haproxy_stats.h \
	agent/state/state.c agent/state/state.h \
	agent/state/push.c agent/state/push.h \
	agent/state/sealed.c agent/state/sealed.h
libagent_la_CFLAGS = $(AM_CFLAGS) $(CURL_CFLAGS) $(SODIUM_CFLAGS)
libagent_la_LIBADD = libcommon.la $(CURL_LIBS) $(SODIUM_LIBS) -lm

tetherd_SOURCES = agent/main.c
tetherd_LDADD = libagent.la
libagent_la_SOURCES += agent/approve.c
