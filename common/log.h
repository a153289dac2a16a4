/* log.h: levelled logging to stderr, one line per message, safe from any thread.
 * fatal() is for start-up failures only; everything else returns an error. */
#ifndef TETHER_LOG_H
#define TETHER_LOG_H

#include <stddef.h>

enum log_level { LOG_LVL_DEBUG, LOG_LVL_INFO, LOG_LVL_WARN, LOG_LVL_ERROR };

void log_init(const char *progname, enum log_level level);
void log_set_level(enum log_level level);
/* Parses "debug", "info", "warn" or "error"; returns -1 on anything else. */
int log_parse_level(const char *s, enum log_level *out);
int log_enabled(enum log_level level);
void log_msg(enum log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Copies in to out[cap] (always terminated) with each control character
 * (below 0x20, and 0x7f) written as \n, \r, \t or \xHH, so a message
 * is one line; stops before an escape that would not fit. Returns the
 * length written. log_msg and fatal run every message through it. */
size_t log_escape(const char *in, char *out, size_t cap);
void fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#define log_debug(...) do { if (log_enabled(LOG_LVL_DEBUG)) log_msg(LOG_LVL_DEBUG, __VA_ARGS__); } while (0)
#define log_info(...) log_msg(LOG_LVL_INFO, __VA_ARGS__)
#define log_warn(...) log_msg(LOG_LVL_WARN, __VA_ARGS__)
#define log_error(...) log_msg(LOG_LVL_ERROR, __VA_ARGS__)

#endif
