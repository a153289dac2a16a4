# agent/local.mk: tetherd's sources, included by the one Makefile.am
# (each wing keeps its list here, so a move touches one file).
# ---- agent ------------------------------------------------------------------
libagent_la_SOURCES = \
	agent/agent.c agent/agent.h agent/agent_int.h agent/agent_config.c agent/agent_config.h \
	agent/ack.c agent/apply.c agent/sync.c agent/fresh.c agent/fresh.h agent/reload.c agent/reload.h \
	agent/consumer.c agent/consumer.h agent/consumer_files.c agent/consumer_gen.c \
	agent/fault.c agent/fault.h \
	agent/lastgood.c agent/lastgood.h \
	agent/push.c agent/push.h \
	agent/render.c agent/render.h agent/render_nginx.c agent/render_haproxy.c \
	agent/haproxy_answer.c agent/haproxy_answer.h agent/haproxy_stats.c agent/haproxy_stats.h \
	agent/runcmd.c agent/runcmd.h \
	agent/safefs.c agent/safefs.h \
	agent/state.c agent/state.h \
	agent/status.c agent/status.h \
	agent/metrics.c agent/metrics_http.c agent/metrics_http.h agent/trust.c \
	agent/traffic_syslog.c agent/traffic_syslog.h agent/traffic_count.c agent/traffic_count.h \
	agent/traffic_report.c agent/haproxy_stats.h
libagent_la_CFLAGS = $(AM_CFLAGS) $(CURL_CFLAGS) $(SODIUM_CFLAGS)
libagent_la_LIBADD = libcommon.la $(CURL_LIBS) $(SODIUM_LIBS) -lm

tetherd_SOURCES = agent/main.c
tetherd_LDADD = libagent.la
