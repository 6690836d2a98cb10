/*
 * Uses every call of forktrace.h and prints what it computes. test_api.py
 * builds it as a user would (strict C99, nothing linked but libc) and
 * checks:
 *  - without any agent, it prints exactly what its build with the calls
 *    removed (-DFT_TEST_NO_CALLS) prints, and exits 0;
 *  - under the fake agent (fake_agent.c), every call arrives with its
 *    arguments, in the order of EXPECTED in test_api.py.
 * With -DFT_TEST_CXX, main also runs the C++ half (use_all_cxx.cpp).
 */
#ifdef FT_TEST_NO_CALLS
#define ft_region_begin(name) ((void)(name))
#define ft_region_end() ((void)0)
#define ft_instant(name) ((void)(name))
#define ft_counter(name, value) ((void)(name), (void)(value))
#define ft_thread_name(name) ((void)(name))
#define FT_REGION(name)
#else
#include <forktrace.h>
#endif

#include <errno.h>
#include <stdio.h>

int cxx_part(void);

/* FT_REGION's end runs on every return path. */
static int depth(int n)
{
	FT_REGION("depth");

	if (n == 0)
		return 0;
	return 1 + depth(n - 1);
}

int main(void)
{
	char name[32];
	int i, sum = 0;

	ft_thread_name("main-thread");
	ft_region_begin("outer");
	ft_instant("checkpoint");
	ft_counter("queue_depth", 42);
	ft_counter("ratio", -0.125);
	{
		/* Two in one block: distinct names, ended in reverse order. */
		FT_REGION("scoped_c");
		FT_REGION("scoped_c_inner");
		ft_instant("inside_scoped_c");
	}
	ft_instant("after_scoped_c");
	{
		/* Two on one line, as a macro of the user's would expand. */
		FT_REGION("same_line_a");
		FT_REGION("same_line_b");
	}
	/* A name in a buffer that is reused right after the call. */
	snprintf(name, sizeof(name), "stack_%d", 7);
	ft_instant(name);
	snprintf(name, sizeof(name), "overwritten");
	printf("depth %d\n", depth(2));
	for (i = 0; i < 3; i++) {
		FT_REGION("loop");

		if (i == 1)
			continue; /* leaves the block: the region ends */
		sum += i;
		ft_instant("loop_body");
	}
	ft_region_end();
	printf("sum %d\n", sum);
	/* Calls neither set nor clear errno. */
	errno = EILSEQ;
	ft_instant("errno_kept");
	ft_counter("errno_kept", 1);
	printf("errno %s\n", errno == EILSEQ ? "kept" : "changed");
#ifdef FT_TEST_CXX
	printf("cxx %d\n", cxx_part());
#endif
	printf("done\n");
	return 0;
}
