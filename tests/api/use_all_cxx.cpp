/*
 * The C++ half of use_all.c (built with -DFT_TEST_CXX): FT_REGION and
 * ft::region end at scope exit, also when an exception leaves the scope.
 * A second translation unit, with its own lookup of the agent.
 */
#ifdef FT_TEST_NO_CALLS
#define ft_instant(name) (static_cast<void>(name))
#define ft_counter(name, value) (static_cast<void>(name), static_cast<void>(value))
#define FT_REGION(name)
namespace ft
{
struct region {
	explicit region(const char *) noexcept
	{
	}
};
} // namespace ft
#else
#include <forktrace.h>
#endif

#include <stdexcept>

extern "C" int cxx_part(void);

static int may_throw(int x)
{
	FT_REGION("cxx_throwing");

	if (x)
		throw std::runtime_error("boom");
	return 0;
}

int cxx_part(void)
{
	int caught = 0;

	{
		FT_REGION("scoped_cxx");
		ft::region inner("raii_cxx");
		ft_instant("inside_scoped_cxx");
	}
	ft_instant("after_scoped_cxx");
	try {
		may_throw(1);
	} catch (const std::exception &) {
		caught = 1;
	}
	ft_instant("after_throw");
	ft_counter("cxx_counter", 1e300);
	return caught;
}
