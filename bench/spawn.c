/* spawn: the cost of loading a library, for `make bench` (bench/loadcost.sh).
 *
 *   spawn run N PROG [ARGS...]   runs PROG N times (posix_spawn + wait) and
 *                                prints the median wall time in ns ("median_ns X")
 *   spawn dlopen LIB             prints the time of dlopen(LIB, RTLD_NOW) in
 *                                this fresh process ("dlopen_ns X"), then the
 *                                RSS growth it caused ("rss_kb X")
 * The environment (LD_PRELOAD included) is passed to PROG unchanged. */
#include <dlfcn.h>
#include <spawn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include "timing.h"

extern char **environ;

static long rss_kb(void)
{
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	long v = -1;
	while (f && fgets(line, sizeof(line), f))
		if (!strncmp(line, "VmRSS:", 6))
			v = strtol(line + 6, NULL, 10);
	if (f)
		fclose(f);
	return v;
}

int main(int argc, char **argv)
{
	if (argc >= 4 && !strcmp(argv[1], "run")) {
		int n = atoi(argv[2]);
		uint64_t *dt = calloc(n > 0 ? n : 1, sizeof(*dt));
		for (int i = 0; i < n; i++) {
			pid_t pid;
			int st;
			uint64_t t0 = mono_ns();
			if (posix_spawn(&pid, argv[3], NULL, NULL, argv + 3, environ) || waitpid(pid, &st, 0) != pid ||
			    !WIFEXITED(st) || WEXITSTATUS(st)) {
				fprintf(stderr, "spawn: %s failed\n", argv[3]);
				return 1;
			}
			dt[i] = mono_ns() - t0;
		}
		qsort(dt, n, sizeof(*dt), cmp_u64);
		printf("median_ns %llu\n", (unsigned long long)dt[n / 2]);
		return 0;
	}
	if (argc == 3 && !strcmp(argv[1], "dlopen")) {
		long r0 = rss_kb();
		uint64_t t0 = mono_ns();
		void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
		uint64_t t1 = mono_ns();
		if (!h) {
			fprintf(stderr, "spawn: %s\n", dlerror());
			return 1;
		}
		printf("dlopen_ns %llu\nrss_kb %ld\n", (unsigned long long)(t1 - t0), rss_kb() - r0);
		return 0;
	}
	fprintf(stderr, "usage: spawn run N PROG [ARGS...] | spawn dlopen LIB\n");
	return 2;
}
