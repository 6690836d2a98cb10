/*
 * static_child CODE: linked with -static, so LD_PRELOAD cannot load the
 * agent into it. Exits CODE.
 */
#include <stdlib.h>

int main(int argc, char **argv)
{
	return argc > 1 ? atoi(argv[1]) : 100;
}
