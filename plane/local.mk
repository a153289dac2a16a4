# plane/local.mk: tether-plane's sources, included by the one Makefile.am
# (each wing keeps its list here, so a move touches one file).
# ---- plane ------------------------------------------------------------------
libplane_la_SOURCES = \
	plane/api_nodes.c plane/api_resources.c plane/api_rollouts.c plane/api_status.c plane/api_sync.c \
	plane/api_tokens.c plane/api_events.c plane/api_ui.c plane/events.c plane/events.h plane/ui_assets.h \
	plane/alive.c plane/alive.h plane/auth.c plane/auth.h plane/freshness.c plane/freshness.h \
	plane/db.c plane/db.h \
	plane/delta.c plane/delta.h \
	plane/digests.c plane/digests.h \
	plane/http.c plane/http.h plane/httpd.c plane/httpd.h plane/http_request.c plane/http_request.h \
	plane/hub.c plane/hub.h \
	plane/nodes.c plane/nodes.h plane/nodes_sqlite.c \
	plane/persist.c plane/persist.h plane/persist_sqlite.c plane/persist_sqlite.h \
	plane/persist_etcd.c plane/persist_etcd.h plane/persist_etcd_records.c plane/persist_etcd_hist.c plane/persist_etcd_vlog.c \
	plane/etcd_client.c plane/etcd_client.h plane/etcd_lease.c plane/etcd_watch.c plane/etcd_value.c plane/etcd_value.h \
	plane/plane.c plane/plane.h plane/plane_config.c \
	plane/pushcache.c plane/pushcache.h \
	plane/rollout.c plane/rollout.h plane/rollout_db.c plane/rollout_db.h plane/gate.c plane/gate.h plane/gate_options.c \
	plane/records_json.c plane/records_json.h \
	plane/relay_link.c plane/relay_link.h plane/relay_state.c plane/relay_state.h plane/persist_relay.c \
	plane/api_relay.c \
	plane/rollout_rec.c plane/rollout_rec.h \
	plane/rollout_order.c plane/rollout_order.h \
	plane/sse_writer.c plane/sse_writer.h \
	plane/statements.c plane/statements.h \
	plane/store.c plane/store.h \
	plane/store_sqlite.c plane/store_sqlite.h \
	plane/vlog_sqlite.c plane/vlog_sqlite.h \
	plane/api_history.c \
	plane/tls.c plane/tls.h \
	plane/tokens.c plane/tokens.h plane/tokens_sqlite.c \
	plane/writer.c plane/writer.h \
	plane/validate.c plane/validate.h
# the console (GET /ui/): its static files compiled in
UI_FILES = plane/ui/index.html plane/ui/app.css plane/ui/app.js
nodist_libplane_la_SOURCES = plane/ui_assets.c
plane/ui_assets.c: $(UI_FILES) scripts/embed-ui
	@$(MKDIR_P) plane
	$(AM_V_GEN)$(SHELL) $(srcdir)/scripts/embed-ui $(srcdir)/plane/ui/index.html $(srcdir)/plane/ui/app.css \
		$(srcdir)/plane/ui/app.js >$@.tmp && mv $@.tmp $@
libplane_la_CFLAGS = $(AM_CFLAGS) $(SQLITE_CFLAGS) $(GNUTLS_CFLAGS) $(CURL_CFLAGS)
libplane_la_LIBADD = libcommon.la $(HTTP_PARSER_LIBS) $(SQLITE_LIBS) $(GNUTLS_LIBS) $(CURL_LIBS) $(PTHREAD_LIBS)

tether_plane_SOURCES = plane/main.c
tether_plane_LDADD = libplane.la
