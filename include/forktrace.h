/*
 * forktrace.h: mark what happens inside a process (regions, instants,
 * counters, thread names) so that `forktrace run` shows it on the thread's
 * track.
 *
 *   #include <forktrace.h>
 *
 *   void solve(void)
 *   {
 *           FT_REGION("solve");            // ends when the block is left
 *           ft_counter("queue_depth", 42);
 *           ft_instant("checkpoint");
 *   }
 *
 * Header only, for C (C99 or later) and C++ (C++11 or later), GCC or clang.
 * Nothing to link: the header finds the agent (libforktrace-agent.so, which
 * `forktrace run` preloads into every traced process) at run time with
 * dlsym. A program built with it runs unchanged without forktrace: every
 * call is then a no-op that costs one load and one branch.
 *
 * Threads: every function may be called from any thread at any time; the
 * event goes to the calling thread's track.
 *
 * Names: every `name` is a NUL-terminated string (UTF-8 for readable
 * output), never NULL. It is borrowed for the duration of the call only:
 * the agent copies it before the call returns, so a stack buffer or a
 * string freed right after the call is fine.
 *
 * Signals and fork: each translation unit that includes this header looks
 * the agent up once, from a constructor when the program (or the library
 * holding it) is loaded, or at its first call if that comes earlier. After
 * that lookup a call does nothing but a load, a branch and a call into the
 * agent, so the header itself adds nothing that is unsafe in a signal
 * handler or in the child of a multithreaded fork.
 *
 * Link-free binding (the ABI between this header and the agent): the agent
 * exports one function, ft__api_get(version), returning a table of function
 * pointers (struct ft__api) or NULL when it does not serve that version.
 * Later versions only append fields to the table; `size` says how many the
 * agent filled in, and a call whose field lies beyond it is a no-op.
 * Everything named ft__ or FT__ is internal to that binding.
 */
#ifndef FORKTRACE_H
#define FORKTRACE_H

#include <stdint.h>

/* The version of the instrumentation API this header speaks. */
#define FT_API_VERSION 1

#ifdef __cplusplus
extern "C" {
#endif

/* The table the agent serves. Version 1; later versions append fields. */
struct ft__api {
	uint32_t version; /* the version of this table, >= the one asked for */
	uint32_t size;    /* sizeof(struct ft__api) as the agent built it */
	void (*region_begin)(const char *name);
	void (*region_end)(void);
	void (*instant)(const char *name);
	void (*counter)(const char *name, double value);
	void (*thread_name)(const char *name);
};

/* The agent's one export: the table for `version`, or NULL when it does
 * not serve that version. The table lives as long as the process. Only
 * the agent defines it (with default visibility); the header never links
 * against it, it looks it up with dlsym. */
const struct ft__api *ft__api_get(unsigned version);
typedef const struct ft__api *(*ft__api_get_fn)(unsigned version);

#ifdef __cplusplus
}
#endif

/* The agent (or a stand-in for it) defines FT__ABI_ONLY before including
 * this header: it needs the table's layout, and none of what follows (a
 * constructor that would look the agent up from inside itself). */
#ifndef FT__ABI_ONLY

#if !defined(__GNUC__)
#error "forktrace.h needs GCC or clang (__atomic builtins, the cleanup attribute)"
#endif

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>

/* The version the header asks the agent for. Only the tests change it, to
 * play a header newer than the agent. */
#ifndef FT__API_REQUEST
#define FT__API_REQUEST FT_API_VERSION
#endif

/* RTLD_DEFAULT is only declared under _GNU_SOURCE, which the includer may
 * not define; glibc (and musl) define it as the null pointer, which is what
 * dlsym then gets. Since glibc 2.34 dlsym lives in libc itself, so nothing
 * needs -ldl; older glibc needs -ldl (pkg-config's Libs and the CMake
 * target then carry it). */
#if defined(RTLD_DEFAULT)
#define FT__RTLD_DEFAULT RTLD_DEFAULT
#elif defined(__cplusplus)
#define FT__RTLD_DEFAULT nullptr
#else
#define FT__RTLD_DEFAULT ((void *)0)
#endif

/* C and C++ spell null pointers and casts differently; these keep the
 * header quiet under -Wold-style-cast and -Wzero-as-null-pointer-constant. */
#ifdef __cplusplus
#define FT__NULL nullptr
#define FT__TO_API(v) reinterpret_cast<const struct ft__api *>(v)
#define FT__TO_UINTPTR(p) reinterpret_cast<uintptr_t>(p)
#else
#define FT__NULL ((void *)0)
#define FT__TO_API(v) ((const struct ft__api *)(v))
#define FT__TO_UINTPTR(p) ((uintptr_t)(p))
#endif

/* The header's own functions are never instrumented: a program built with
 * -finstrument-functions would otherwise see ft_region_begin and friends
 * as calls in its trace, around every region. */
#define FT__NOINST __attribute__((no_instrument_function))

/* Whether the agent's table `a` holds the function pointer `field`. */
#define FT__HAS(a, field)                                                                          \
	((a)->size >= offsetof(struct ft__api, field) + sizeof(void (*)(void)) &&                  \
	 (a)->field != FT__NULL)

/* This translation unit's view of the agent: 0 until looked up, then
 * FT__API_ABSENT, or the address of the agent's table. A sentinel rather
 * than a second variable keeps the no-agent path at one load and one
 * compare. Written with release and read with acquire, so a thread that
 * sees the address also sees the table the agent filled in. */
#define FT__API_ABSENT 1u
static uintptr_t ft__api_cache;

/* Looks the agent up and publishes the result in ft__api_cache. Threads
 * racing here all compute the same value, so the lookup is idempotent and
 * needs no lock. A table that is too old or too small counts as absent.
 * Preserves errno and dlerror(): the program must not see the failed
 * lookup of an absent agent. Not async-signal-safe (dlsym); the constructor
 * below makes sure it normally runs at load time. */
FT__NOINST static uintptr_t ft__api_resolve(void)
{
	int saved_errno = errno;
	void *sym = dlsym(FT__RTLD_DEFAULT, "ft__api_get");
	ft__api_get_fn get = FT__NULL;
	const struct ft__api *api = FT__NULL;
	uintptr_t v = FT__API_ABSENT;

	if (sym) {
		/* ISO C has no cast from object to function pointer; POSIX
		 * guarantees they have the same representation. */
		__builtin_memcpy(&get, &sym, sizeof(get));
		api = get(FT__API_REQUEST);
	} else {
		(void)dlerror();
	}
	if (api && api->version >= FT__API_REQUEST &&
	    api->size >= offsetof(struct ft__api, region_begin))
		v = FT__TO_UINTPTR(api);
	__atomic_store_n(&ft__api_cache, v, __ATOMIC_RELEASE);
	errno = saved_errno;
	return v;
}

/* Resolves at load time, so that the first call (which may come from a
 * signal handler) finds the lookup done. */
__attribute__((constructor, unused)) FT__NOINST static void ft__api_prime(void)
{
	if (__atomic_load_n(&ft__api_cache, __ATOMIC_ACQUIRE) == 0)
		(void)ft__api_resolve();
}

/* The agent's table, or NULL when there is no agent (or no usable one). */
FT__NOINST static inline const struct ft__api *ft__api_table(void)
{
	uintptr_t v = __atomic_load_n(&ft__api_cache, __ATOMIC_ACQUIRE);

	if (v == FT__API_ABSENT)
		return FT__NULL;
	if (__builtin_expect(v == 0, 0)) {
		v = ft__api_resolve();
		if (v == FT__API_ABSENT)
			return FT__NULL;
	}
	return FT__TO_API(v);
}

/* Opens a region called `name` on the calling thread: a slice that lasts
 * until the matching ft_region_end(). Regions nest; each thread has its own
 * stack of them. `name` is borrowed for the call (the agent copies it). */
FT__NOINST static inline void ft_region_begin(const char *name)
{
	const struct ft__api *a = ft__api_table();

	if (a && FT__HAS(a, region_begin))
		a->region_begin(name);
}

/* Closes the innermost region the calling thread opened. */
FT__NOINST static inline void ft_region_end(void)
{
	const struct ft__api *a = ft__api_table();

	if (a && FT__HAS(a, region_end))
		a->region_end();
}

/* Records a point in time called `name` on the calling thread (an instant
 * event). `name` is borrowed for the call (the agent copies it). */
FT__NOINST static inline void ft_instant(const char *name)
{
	const struct ft__api *a = ft__api_table();

	if (a && FT__HAS(a, instant))
		a->instant(name);
}

/* Sets the counter `name` to `value` from now on: one counter track per
 * name and process, drawn as a step function. `name` is borrowed for the
 * call (the agent copies it). */
FT__NOINST static inline void ft_counter(const char *name, double value)
{
	const struct ft__api *a = ft__api_table();

	if (a && FT__HAS(a, counter))
		a->counter(name, value);
}

/* Names the calling thread's track `name` (the last call wins); threads
 * not named here keep their system name. `name` is borrowed for the call
 * (the agent copies it), and the kernel's thread name is left alone. */
FT__NOINST static inline void ft_thread_name(const char *name)
{
	const struct ft__api *a = ft__api_table();

	if (a && FT__HAS(a, thread_name))
		a->thread_name(name);
}

#define FT__CAT2(a, b) a##b
#define FT__CAT(a, b) FT__CAT2(a, b)

#ifdef __cplusplus

namespace ft
{

/* A region that lasts as long as the object: begins in the constructor,
 * ends in the destructor, so also when an exception leaves the scope.
 * `name` is borrowed for the constructor call only. */
class region
{
      public:
	FT__NOINST explicit region(const char *name) noexcept
	{
		ft_region_begin(name);
	}
	FT__NOINST ~region()
	{
		ft_region_end();
	}
	region(const region &) = delete;
	region &operator=(const region &) = delete;
};

} /* namespace ft */

/* FT_REGION(name): a region from here to the end of the enclosing block.
 * It is a declaration; several may share a block (they end in reverse
 * order). */
#define FT_REGION(name) ::ft::region FT__CAT(ft__region_, __COUNTER__)(name)

#else

/* The end of an FT_REGION, run by the cleanup attribute when the block is
 * left (normally, by return, break or goto; not by longjmp). */
FT__NOINST static inline void ft__region_cleanup(int *unused)
{
	(void)unused;
	ft_region_end();
}

/* FT_REGION(name): a region from here to the end of the enclosing block.
 * It is a declaration (of a uniquely named int whose cleanup ends the
 * region); several may share a block (they end in reverse order). */
#define FT_REGION(name)                                                                            \
	int FT__CAT(ft__region_, __COUNTER__)                                                      \
		__attribute__((cleanup(ft__region_cleanup), unused)) = (ft_region_begin(name), 0)

#endif /* __cplusplus */

#endif /* FT__ABI_ONLY */

#endif /* FORKTRACE_H */
