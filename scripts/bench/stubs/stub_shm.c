/* Transport stub for docs/BENCHMARKS.md: STUB_SHM=FILE makes every image map
 * the 4 KiB slot of its pid in a shared file and write 100 bytes there. */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
__attribute__((constructor)) static void init(void)
{
	const char *p = getenv("STUB_SHM");
	if (!p)
		return;
	int fd = open(p, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return;
	off_t off = (off_t)getpid() * 4096;
	char *m = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
	close(fd);
	if (m == MAP_FAILED)
		return;
	memset(m, 1, 100);
	__atomic_store_n((int *)m, 100, __ATOMIC_RELEASE);
}
