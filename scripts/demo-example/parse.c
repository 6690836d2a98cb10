#include <stdlib.h>
int parse(const char *s)
{
	return atoi(s);
}
