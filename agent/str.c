/*
 * str.c - the string and memory functions the agent calls, its own.
 *
 * Each libc function the agent imports costs every traced image a
 * dynamic-loader look-up before main (through the program, the agent and
 * libc: ~700 instructions each, measured with callgrind on /bin/true).
 * The agent is linked with lazy binding so that an import costs only the
 * images that call it; these functions are called by every image, from
 * the constructor and the exec path, so they are defined here instead.
 * The library's default visibility is hidden: the agent's calls, the
 * compiler's own memcpy/memset calls included, bind to these at link time
 * and the program never sees them.
 *
 * Built with -fno-builtin and -fno-tree-loop-distribute-patterns
 * (agent/CMakeLists.txt), so the compiler cannot turn a loop below back
 * into a call to itself. The agent copies short strings and frames of a
 * few KiB at most: plain loops, with the x86 string instructions (fast on
 * every CPU of the last decade) for the two bulk operations.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"

void *memcpy(void *restrict dst, const void *restrict src, size_t n)
{
#if AGENT_X86_64
	void *ret = dst;

	__asm__ volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
	return ret;
#else
	unsigned char *d = dst;
	const unsigned char *s = src;

	while (n--)
		*d++ = *s++;
	return dst;
#endif
}

void *memset(void *dst, int c, size_t n)
{
#if AGENT_X86_64
	void *ret = dst;

	__asm__ volatile("rep stosb" : "+D"(dst), "+c"(n) : "a"(c) : "memory");
	return ret;
#else
	unsigned char *d = dst;

	while (n--)
		*d++ = (unsigned char)c;
	return dst;
#endif
}

void *memmove(void *dst, const void *src, size_t n)
{
	unsigned char *d = dst;
	const unsigned char *s = src;

	if ((uintptr_t)d - (uintptr_t)s >= n)
		return memcpy(dst, src, n); /* no overlap that a forward copy breaks */
	while (n--)
		d[n] = s[n];
	return dst;
}

int memcmp(const void *a, const void *b, size_t n)
{
	const unsigned char *x = a, *y = b;

	for (; n; n--, x++, y++)
		if (*x != *y)
			return *x - *y;
	return 0;
}

void *memchr(const void *s, int c, size_t n)
{
	const unsigned char *p = s;

	for (; n; n--, p++)
		if (*p == (unsigned char)c)
			return (void *)p;
	return NULL;
}

size_t strlen(const char *s)
{
	const char *p = s;

	while (*p)
		p++;
	return (size_t)(p - s);
}

size_t strnlen(const char *s, size_t max)
{
	size_t n = 0;

	while (n < max && s[n])
		n++;
	return n;
}

char *stpcpy(char *restrict dst, const char *restrict src)
{
	while ((*dst = *src++))
		dst++;
	return dst;
}

char *strcpy(char *restrict dst, const char *restrict src)
{
	stpcpy(dst, src);
	return dst;
}

char *strncpy(char *restrict dst, const char *restrict src, size_t n)
{
	size_t i = 0;

	for (; i < n && src[i]; i++)
		dst[i] = src[i];
	for (; i < n; i++)
		dst[i] = '\0';
	return dst;
}

int strncmp(const char *a, const char *b, size_t n)
{
	for (; n; n--, a++, b++) {
		if (*a != *b)
			return (unsigned char)*a - (unsigned char)*b;
		if (!*a)
			break;
	}
	return 0;
}

char *strchrnul(const char *s, int c)
{
	while (*s && *s != (char)c)
		s++;
	return (char *)s;
}

char *strchr(const char *s, int c)
{
	s = strchrnul(s, c);
	return *s == (char)c ? (char *)s : NULL;
}

char *strrchr(const char *s, int c)
{
	const char *last = NULL;

	do {
		if (*s == (char)c)
			last = s;
	} while (*s++);
	return (char *)last;
}

char *agent_utoa(char *p, uint64_t v)
{
	char tmp[24];
	int n = 0;

	do {
		tmp[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		*p++ = tmp[--n];
	return p;
}

size_t strcspn(const char *s, const char *reject)
{
	size_t n = 0;

	for (; s[n]; n++)
		if (strchr(reject, s[n]))
			break;
	return n;
}
