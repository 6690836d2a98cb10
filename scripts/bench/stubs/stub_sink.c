/* The receiving end for stub_socket.c: an epoll loop that accepts (s) or
 * receives (d) and drops everything. Usage: stub_sink PATH s|d */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
int main(int argc, char **argv)
{
	int dgram = argv[2][0] == 'd';
	struct sockaddr_un a = {.sun_family = AF_UNIX};
	strcpy(a.sun_path, argv[1]);
	unlink(argv[1]);
	int l = socket(AF_UNIX, dgram ? SOCK_DGRAM : SOCK_STREAM, 0);
	bind(l, (struct sockaddr *)&a, sizeof a);
	if (!dgram)
		listen(l, 4096);
	int ep = epoll_create1(0);
	struct epoll_event ev = {.events = EPOLLIN, .data.fd = l};
	epoll_ctl(ep, EPOLL_CTL_ADD, l, &ev);
	char buf[65536];
	long n = 0;
	for (;;) {
		struct epoll_event evs[64];
		int k = epoll_wait(ep, evs, 64, -1);
		for (int i = 0; i < k; i++) {
			int fd = evs[i].data.fd;
			if (dgram) {
				while (recv(fd, buf, sizeof buf, MSG_DONTWAIT) > 0)
					n++;
				continue;
			}
			if (fd == l) {
				int c = accept4(l, NULL, NULL, SOCK_NONBLOCK);
				struct epoll_event e2 = {.events = EPOLLIN, .data.fd = c};
				epoll_ctl(ep, EPOLL_CTL_ADD, c, &e2);
			} else {
				ssize_t r = read(fd, buf, sizeof buf);
				if (r <= 0) {
					epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
					close(fd);
					n++;
				}
			}
		}
	}
}
