/*
 * strview - a string by pointer and length, as the readers hand over
 * slices of their input and the writers take them.
 */
#ifndef FT_COMBINE_STRVIEW_H
#define FT_COMBINE_STRVIEW_H

#include <stddef.h>
#include <string.h>

/* A string by pointer and length: readers hand over slices of their input
 * that are not NUL-terminated. p == NULL means "absent". */
typedef struct strview {
	const char *p;
	size_t n;
} strview;

static inline strview strview_c(const char *s)
{
	strview v = {s, s != NULL ? strlen(s) : 0};

	return v;
}

#endif /* FT_COMBINE_STRVIEW_H */
