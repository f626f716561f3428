/* Load, unload, then fork and exec: the host program must survive rsverbs
 * leaving its address space (ctest/unload.sh; src/lifecycle.rs).
 *
 *   unload LIB ROUNDS   dlopen LIB and dlclose it ROUNDS times, then fork:
 *                       the child forks once more and execs /bin/true.
 * The process's open fds are counted before and after the rounds: with
 * RSVERBS_TRACE=FILE each load opened the trace file, and each unload
 * must close it (docs/security.md, promise 17: 100 rounds left 100 fds
 * before).
 * Prints "unload: ok" and exits 0 when every child exited 0 and no fd
 * was left; exits 1 otherwise, naming the signal that killed a child. */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static int child_status(pid_t pid, const char *what)
{
	int st;
	if (waitpid(pid, &st, 0) != pid) {
		perror("waitpid");
		return 1;
	}
	if (WIFSIGNALED(st)) {
		printf("unload: %s killed by signal %d (%s)\n", what, WTERMSIG(st), strsignal(WTERMSIG(st)));
		return 1;
	}
	if (WEXITSTATUS(st) != 0) {
		printf("unload: %s exited %d\n", what, WEXITSTATUS(st));
		return 1;
	}
	return 0;
}

static int open_fds(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/fd");
	if (!d)
		return -1;
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

int main(int argc, char **argv)
{
	if (argc != 3) {
		fprintf(stderr, "usage: unload LIB ROUNDS\n");
		return 2;
	}
	int rounds = atoi(argv[2]);
	int fds = open_fds();
	for (int i = 0; i < rounds; i++) {
		void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
		if (!h) {
			printf("unload: dlopen: %s\n", dlerror());
			return 1;
		}
		if (!dlsym(h, "rsverbs_attach_mcast")) {
			printf("unload: dlsym: %s\n", dlerror());
			return 1;
		}
		if (dlclose(h) != 0) {
			printf("unload: dlclose: %s\n", dlerror());
			return 1;
		}
		/* Really gone: a no-load open finds nothing. */
		if (dlopen(argv[1], RTLD_NOW | RTLD_NOLOAD)) {
			printf("unload: still mapped after dlclose\n");
			return 1;
		}
	}
	if (open_fds() != fds) {
		printf("unload: %d fds open before %d loads and unloads, %d after\n", fds, rounds, open_fds());
		return 1;
	}
	fflush(stdout);
	pid_t pid = fork();
	if (pid < 0) {
		perror("fork");
		return 1;
	}
	if (pid == 0) {
		pid_t inner = fork();
		if (inner < 0)
			_exit(3);
		if (inner == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(4);
		}
		_exit(child_status(inner, "grandchild"));
	}
	if (child_status(pid, "child"))
		return 1;
	printf("unload: ok\n");
	return 0;
}
