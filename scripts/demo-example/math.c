int square(int v)
{
	return v * v;
}
