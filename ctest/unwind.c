/* A thread that ends inside a verb must not take the process with it
 * (docs/security.md, promise 15 and "Thread cancellation").
 *
 * usage: unwind LIB cancel|sigexit
 *
 * With RSVERBS_TRACE=1 in the environment, every call writes its line to
 * stderr; stderr is a full pipe here, so the traced ibv_query_gid(NULL, ...)
 * of the worker thread blocks inside the library, in its write. Once
 * /proc shows the worker blocked in write(2) on fd 2:
 *   cancel:  pthread_cancel(worker). The library's write is not a
 *            cancellation point: the worker leaves the verb when the pipe
 *            is drained and is cancelled at its own pthread_testcancel().
 *            (Before: glibc's write acted on the cancellation, and the
 *            forced unwind met the library's aborting personality: SIGABRT.)
 *   sigexit: SIGUSR1, whose handler calls pthread_exit(): a forced unwind
 *            that starts in the handler and passes through the library's
 *            frames (before: SIGABRT).
 * Then the process calls the verb once more and prints "unwind: ok". */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

typedef int (*query_gid_fn)(void *ctx, unsigned char port, int index, void *gid);
static query_gid_fn query_gid;
static int out; /* the test's own output, a dup of the original stderr */
static volatile pid_t worker_tid;
static volatile int looped;

static void die(const char *what)
{
	dprintf(out, "unwind: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void *worker(void *arg)
{
	unsigned char gid[16];
	(void)arg;
	worker_tid = (pid_t)syscall(SYS_gettid);
	for (;;) {
		query_gid(NULL, 1, 0, gid);
		looped++;
		pthread_testcancel();
	}
	return NULL;
}

static void on_usr1(int sig)
{
	(void)sig;
	pthread_exit(NULL);
}

/* Whether thread tid is blocked in write(2) on fd 2 (/proc/.../syscall:
 * "NR arg0 ...", arguments in hex). */
static int blocked_in_write(pid_t tid)
{
	char path[64], buf[256];
	long nr;
	unsigned long fd;
	FILE *f;
	snprintf(path, sizeof path, "/proc/self/task/%d/syscall", (int)tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	if (!fgets(buf, sizeof buf, f)) {
		fclose(f);
		return 0;
	}
	fclose(f);
	return sscanf(buf, "%ld 0x%lx", &nr, &fd) == 2 && nr == SYS_write && fd == 2;
}

static void *drain(void *arg)
{
	char buf[4096];
	int fd = *(int *)arg;
	while (read(fd, buf, sizeof buf) > 0)
		;
	return NULL;
}

int main(int argc, char **argv)
{
	int p[2], i;
	pthread_t t, d;
	void *ret;
	unsigned char gid[16];
	if (argc != 3)
		return 2;
	out = dup(2);
	if (out < 0)
		die("dup");
	void *lib = dlopen(argv[1], RTLD_NOW);
	if (!lib) {
		dprintf(out, "unwind: %s\n", dlerror());
		return 1;
	}
	query_gid = (query_gid_fn)dlsym(lib, "ibv_query_gid");
	if (!query_gid)
		die("dlsym");
	if (pipe(p) || dup2(p[1], 2) < 0)
		die("pipe");
	/* Fill the pipe, then make writes block again. */
	if (fcntl(p[1], F_SETFL, O_NONBLOCK))
		die("fcntl");
	while (write(p[1], "xxxxxxxxxxxxxxxx", 16) > 0)
		;
	if (fcntl(p[1], F_SETFL, 0))
		die("fcntl");
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1; /* no SA_RESTART */
	if (sigaction(SIGUSR1, &sa, NULL))
		die("sigaction");
	if (pthread_create(&t, NULL, worker, NULL))
		die("pthread_create");
	for (i = 0; i < 10000 && !(worker_tid && blocked_in_write(worker_tid)); i++)
		usleep(1000);
	if (i == 10000) {
		dprintf(out, "unwind: the worker never blocked in write on fd 2\n");
		return 1;
	}
	if (!strcmp(argv[2], "cancel")) {
		if (pthread_cancel(t))
			die("pthread_cancel");
	} else if (!strcmp(argv[2], "sigexit")) {
		if (pthread_kill(t, SIGUSR1))
			die("pthread_kill");
	} else {
		return 2;
	}
	if (pthread_create(&d, NULL, drain, &p[0]))
		die("pthread_create");
	if (pthread_join(t, &ret))
		die("pthread_join");
	if (!strcmp(argv[2], "cancel") && ret != PTHREAD_CANCELED) {
		dprintf(out, "unwind: the worker was not cancelled\n");
		return 1;
	}
	/* The library still answers: NULL context, -1 and EINVAL (rdma-core's
	 * ibv_query_gid answers -1 on any failure). */
	if (dup2(out, 2) < 0)
		die("dup2");
	errno = 0;
	i = query_gid(NULL, 1, 0, gid);
	if (i != -1 || errno != EINVAL) {
		dprintf(out, "unwind: ibv_query_gid(NULL) returned %d, errno %d after the unwind\n", i, errno);
		return 1;
	}
	dprintf(out, "unwind: ok (%s, worker looped %d times)\n", argv[2], looped);
	return 0;
}
