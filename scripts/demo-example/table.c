static const int table[] = {1, 2, 3, 4, 5, 6, 7, 8};
int table_size(void)
{
	return (int)(sizeof(table) / sizeof(table[0])) - 8;
}
