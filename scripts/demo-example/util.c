int twice(int v)
{
	return 2 * v;
}
