/* api_events.c: GET /v1/events, the operators' Server-Sent Events stream
 * (events.h): a reader or above; resumes from Last-Event-ID (or the query
 * parameter last_id, for clients that cannot set headers). */
#include "auth.h"
#include "events.h"
#include "http.h"
#include "log.h"
#include "plane.h"
#include "tokens.h"
#include "util.h"

#include <stdio.h>

enum MHD_Result api_events(struct plane *p, struct MHD_Connection *c)
{
	struct principal who;
	enum MHD_Result ret;
	if (!auth_allow(p, c, ROLE_READER, &who, &ret))
		return ret;
	const char *last = http_header(c, "Last-Event-ID");
	if (!last || !*last)
		last = http_query(c, "last_id");
	uint64_t id = 0;
	bool resume = last && *last;
	if (resume && parse_u64(last, &id) < 0)
		return http_send_error(c, MHD_HTTP_BAD_REQUEST, "Last-Event-ID: '%.32s' is not an event id", last);
	struct events_sub *s = events_sub_new(p->events, c, id, resume, who.token_id);
	/* a revocation between the check above and now would have missed it */
	if (who.token_id[0] && tokens_revoked(p->tokens, who.token_id))
		events_close_token(p->events, who.token_id);
	log_info("events: %s subscribed%s", who.who, resume ? " (resuming)" : "");
	/* the block size is malloc'd with the response and kept as long as
	 * the stream (as the nodes' streams, hub.c): small */
	struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 256, events_sub_read, s,
								      events_sub_free);
	if (!resp) {
		events_sub_free(s);
		return MHD_NO;
	}
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache, no-transform");
	MHD_add_response_header(resp, "X-Accel-Buffering", "no");
	ret = MHD_queue_response(c, MHD_HTTP_OK, resp);
	MHD_destroy_response(resp);
	return ret;
}
