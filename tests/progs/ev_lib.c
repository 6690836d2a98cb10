/* The shared library ev_funcs links (instrumented). */
int lib_add(int a, int b);
int lib_add(int a, int b)
{
	return a + b;
}
