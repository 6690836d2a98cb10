int twice(int v);
int eval(int v)
{
	return twice(v);
}
