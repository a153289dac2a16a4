# plane/local.mk: tether-plane's sources, included by the one Makefile.am
# (each wing keeps its list here, so a move touches one file).
# ---- plane ------------------------------------------------------------------
libplane_la_SOURCES =
# top: start-up, options; wires the wings
libplane_la_SOURCES += plane/plane.c plane/plane.h plane/plane_config.c
# api/: the handlers and their route table
libplane_la_SOURCES += plane/api/api.h plane/api/routes.c plane/api/events.c plane/api/freeze.c plane/api/history.c plane/api/nodes.c plane/api/relay.c \
	plane/api/resources.c plane/api/rollouts.c plane/api/secrets.c plane/api/status.c plane/api/sync.c plane/api/tokens.c \
	plane/api/ui.c plane/api/ui_assets.h plane/api/ui_session.c
# http/: the plane's side of the server: dispatch by the route table, auth, TLS
libplane_la_SOURCES += plane/http/auth.c plane/http/auth.h plane/http/http.c plane/http/http.h \
	plane/http/tickets.c plane/http/tickets.h plane/http/tls.c plane/http/tls.h
# net/: the HTTP/1.1 server's engine (threads, connections, suspended requests) and its parser
libplane_la_SOURCES += plane/net/httpd.c plane/net/httpd.h plane/net/http_request.c plane/net/http_request.h
# rollout/: staged rollouts and their gates
libplane_la_SOURCES += plane/rollout/gate.c plane/rollout/gate.h plane/rollout/gate_options.c \
	plane/rollout/order.c plane/rollout/order.h plane/rollout/rollout.c plane/rollout/rollout.h
# core/: store, deltas, streams, writes, node records, events
libplane_la_SOURCES += plane/core/core.c plane/core/core.h plane/core/delta.c plane/core/delta.h plane/core/digests.c \
	plane/core/digests.h plane/core/events.c plane/core/events.h plane/core/freeze_state.c plane/core/freeze_state.h plane/core/freshness.c \
	plane/core/freshness.h plane/core/hub.c plane/core/hub.h plane/core/nodekeys.c plane/core/nodekeys.h plane/core/nodes.c plane/core/nodes.h \
	plane/core/pushcache.c plane/core/pushcache.h plane/core/relay_feed.c plane/core/relay_feed.h plane/core/sealed.c plane/core/sealed.h plane/core/sse_writer.c plane/core/sse_writer.h \
	plane/core/statements.c plane/core/statements.h plane/core/store.c plane/core/store.h \
	plane/core/ticket_keeper.c plane/core/ticket_keeper.h plane/core/tokens.c plane/core/tokens.h plane/core/validate.c plane/core/validate.h \
	plane/core/wrapindex.c plane/core/wrapindex.h plane/core/writer.c plane/core/writer.h
# core/: guards on writes, and the versions that overrode them
libplane_la_SOURCES += plane/core/guardcheck.c plane/core/guardcheck.h plane/core/overrides.c plane/core/overrides.h
# persist/: the seam
libplane_la_SOURCES += plane/persist/persist.c plane/persist/persist.h plane/persist/records_json.c \
	plane/persist/records_json.h plane/persist/node_changes.c plane/persist/node_changes.h plane/persist/rollout_rec.c plane/persist/rollout_rec.h \
	plane/persist/ticket_keys.c plane/persist/ticket_keys.h
# persist/sqlite/
libplane_la_SOURCES += plane/persist/sqlite/db.c plane/persist/sqlite/db.h \
	plane/persist/sqlite/nodes.c plane/persist/sqlite/rollout.c plane/persist/sqlite/rollout.h \
	plane/persist/sqlite/sqlite.c plane/persist/sqlite/sqlite.h plane/persist/sqlite/store.c \
	plane/persist/sqlite/store.h plane/persist/sqlite/ticket_keys.c plane/persist/sqlite/tokens.c plane/persist/sqlite/freeze.c plane/persist/sqlite/vlog.c \
	plane/persist/sqlite/vlog.h
# persist/etcd/
libplane_la_SOURCES += plane/persist/etcd/client.c plane/persist/etcd/client.h \
	plane/persist/etcd/etcd.c plane/persist/etcd/etcd.h plane/persist/etcd/hist.c \
	plane/persist/etcd/lease.c plane/persist/etcd/records.c plane/persist/etcd/ticket_keys.c plane/persist/etcd/value.c plane/persist/etcd/freeze.c \
	plane/persist/etcd/value.h plane/persist/etcd/vlog.c plane/persist/etcd/watch.c
# persist/relay/
libplane_la_SOURCES += plane/persist/relay/link.c plane/persist/relay/link.h \
	plane/persist/relay/relay.c plane/persist/relay/state.c plane/persist/relay/state.h
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
# approvals that nodes enforce
libplane_la_SOURCES += plane/api/approvals.c plane/core/approvals.c plane/core/approvals.h
libplane_la_SOURCES += plane/persist/sqlite/approvals.c plane/persist/etcd/approvals.c
