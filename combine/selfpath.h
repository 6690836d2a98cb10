/*
 * selfpath.h - where the files installed with forktrace are.
 */
#ifndef FT_COMBINE_SELFPATH_H
#define FT_COMBINE_SELFPATH_H

#include <stddef.h>

/*
 * The canonical path of file `name` shipped with the forktrace executable:
 * next to it (the build tree), or in ../lib/forktrace/ from it (an
 * installed $prefix/bin/forktrace), into out (cap bytes). Returns 0, or
 * -ENOENT when neither exists readable.
 */
int ft_beside_self(const char *name, char *out, size_t cap);

#endif /* FT_COMBINE_SELFPATH_H */
