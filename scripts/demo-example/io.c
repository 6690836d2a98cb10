#include <stdio.h>
void io_banner(void)
{
	fputs("built by make -j4\n", stdout);
}
