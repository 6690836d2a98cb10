/* Transport stub for the benchmark in docs/BENCHMARKS.md: STUB_SOCK=PATH
 * STUB_MODE=s|d makes every image connect (stream) or sendto (datagram) and
 * send 100 bytes. Build: cc -O2 -shared -fPIC. */
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
static char msg[100];
__attribute__((constructor)) static void init(void)
{
	const char *p = getenv("STUB_SOCK"), *mode = getenv("STUB_MODE");
	if (!p)
		return;
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strcpy(a.sun_path, p);
	int dgram = mode && mode[0] == 'd';
	int fd = socket(AF_UNIX, (dgram ? SOCK_DGRAM : SOCK_STREAM) | SOCK_CLOEXEC, 0);
	if (dgram) {
		sendto(fd, msg, sizeof msg, 0, (struct sockaddr *)&a, sizeof a);
	} else {
		if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0)
			send(fd, msg, sizeof msg, MSG_NOSIGNAL);
	}
	close(fd);
}
