/* vec: the growable array (vec.h). */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

#include "vec.h"

int vec_grow_slow(void *arrp, size_t *cap, size_t need, size_t elem, size_t first)
{
	void **arr = arrp;
	size_t ncap = *cap != 0 ? *cap : first;
	void *p;

	if (need <= *cap)
		return 0;
	if (ncap == 0)
		ncap = 1;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (elem != 0 && ncap > SIZE_MAX / elem)
		return -ENOMEM;
	p = realloc(*arr, ncap * elem);
	if (p == NULL)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}
