/* api/events.c: GET /v1/events, the operators' Server-Sent Events stream
 * (events.h): a reader or above; resumes from Last-Event-ID (or the query
 * parameter last_id, for clients that cannot set headers). */
#include "api/api.h"
#include "core/core.h"
#include "core/events.h"
#include "core/tokens.h"
#include "http/auth.h"
#include "http/http.h"
#include "log.h"
#include "util.h"

#include <stdio.h>

enum http_result api_events(struct api *p, struct http_conn *c)
{
	struct principal who;
	enum http_result ret;
	if (!auth_allow(p->auth, c, ROLE_READER, &who, &ret))
		return ret;
	const char *last = http_header(c, "Last-Event-ID");
	if (!last || !*last)
		last = http_query(c, "last_id");
	uint64_t id = 0;
	bool resume = last && *last;
	if (resume && parse_u64(last, &id) < 0)
		return http_send_error(c, HTTP_BAD_REQUEST, "Last-Event-ID: '%.32s' is not an event id", last);
	struct events_sub *s = events_sub_new(p->core->events, c, id, resume, who.token_id);
	/* a revocation or a session's end between the check above and now
	 * would have missed it */
	if (who.token_id[0] && tokens_ended(p->core->tokens, who.token_id, wall_seconds()))
		events_close_token(p->core->events, who.token_id);
	log_info("events: %s subscribed%s", who.who, resume ? " (resuming)" : "");
	struct http_response *resp = http_response_reader(events_sub_read, s, events_sub_free);
	if (!resp) {
		events_sub_free(s);
		return HTTP_NO;
	}
	http_response_header(resp, HTTP_HEADER_CONTENT_TYPE, "text/event-stream");
	http_response_header(resp, HTTP_HEADER_CACHE_CONTROL, "no-cache, no-transform");
	http_response_header(resp, "X-Accel-Buffering", "no");
	ret = http_queue(c, HTTP_OK, resp);
	return ret;
}
