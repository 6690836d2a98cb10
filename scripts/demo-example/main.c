#include <stdio.h>
int parse(const char *s);
int eval(int v);
void print(int v);
int table_size(void);
int main(void)
{
	print(eval(parse("21")) + table_size());
	return 0;
}
