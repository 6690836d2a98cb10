/* The library ev_funcs dlopens (instrumented). */
int plugin_mul(int a, int b);
int plugin_mul(int a, int b)
{
	return a * b;
}
