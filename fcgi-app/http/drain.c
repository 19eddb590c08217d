/* The drainer: one thread, one epoll set of pipes to read and drop (see
 * drain.h).  Bounded: past DRAIN_MAX pipes at once the oldest are not
 * dropped but the new one is closed (its writers then see EPIPE, as with
 * no reader at all). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "drain.h"

#define DRAIN_MAX 4096

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int epfd = -1;
static int count;   /* pipes in the set (only the drainer decrements) */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void *drainer(void *arg)
{
	struct epoll_event ev[64];
	char buf[65536];

	(void)arg;
	for (;;) {
		int n = epoll_wait(epfd, ev, 64, -1);

		for (int i = 0; i < n; i++) {
			int fd = ev[i].data.fd;
			ssize_t k = read(fd, buf, sizeof(buf));

			if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
				close(fd);   /* also leaves the epoll set */
				pthread_mutex_lock(&lock);
				count--;
				pthread_mutex_unlock(&lock);
			}
		}
	}
	return NULL;
}

static void start(void)
{
	pthread_t t;
	pthread_attr_t a;

	epfd = epoll_create1(EPOLL_CLOEXEC);
	pthread_attr_init(&a);
	pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
	if (epfd >= 0 && pthread_create(&t, &a, drainer, NULL) != 0) {
		close(epfd);
		epfd = -1;
	}
	pthread_attr_destroy(&a);
	if (epfd < 0)
		fprintf(stderr, "roombox-fcgi: drainer: cannot start; background output pipes are closed\n");
}

void drain_add(int fd)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.fd = fd };
	bool room;

	pthread_once(&once, start);
	pthread_mutex_lock(&lock);
	room = count < DRAIN_MAX;
	if (room)
		count++;
	pthread_mutex_unlock(&lock);
	if (!room || epfd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		if (room) {
			pthread_mutex_lock(&lock);
			count--;
			pthread_mutex_unlock(&lock);
		}
		close(fd);
	}
}
