/*
 * JSON string escaping for code outside combine/ that builds small JSON
 * texts itself (the collector's mark args, model_mark.args_json), so that
 * forktrace has one definition of how a JSON string is written: the same
 * as the trace writer's (ostream_json_str).
 */
#ifndef FT_COMBINE_JSONW_H
#define FT_COMBINE_JSONW_H

#include <stddef.h>

/*
 * Writes the n bytes at s as a complete JSON string literal, quotes
 * included, into out (cap bytes; not NUL-terminated). The bytes need not
 * be valid UTF-8: malformed bytes become \ufffd, so the result is always
 * valid JSON and UTF-8. When the literal does not fit, its content is cut
 * before the first character (or escape) that does not fit and the
 * closing quote is still written. Returns the bytes written: at least 2,
 * or 0 (nothing written) when cap < 2. Borrows out and s for the call.
 */
size_t jsonw_escape(char *out, size_t cap, const char *s, size_t n);

#endif /* FT_COMBINE_JSONW_H */
