// Known C++ functions for test_symtab: one name in a namespace, overloaded,
// so that only the demangled signature tells them apart.
namespace symtab_ns
{

int twice(int x)
{
	int s = 0;

	for (int i = 0; i < x; i++)
		s += 2 * i;
	return s;
}

double twice(double x)
{
	double s = 0;

	for (int i = 0; i < 4; i++)
		s += 2 * x;
	return s;
}

} // namespace symtab_ns
