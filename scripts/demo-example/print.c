#include <stdio.h>
void print(int v)
{
	printf("app says %d\n", v);
}
