/* noioctl ERRNO PROGRAM [ARGS...]: runs PROGRAM with a seccomp filter that
 * makes ioctl(fd, RDMA_VERBS_IOCTL, ...) fail with ERRNO (ENOTTY = a kernel
 * without the ioctl framework; EPROTONOSUPPORT = one without the method).
 * rdma-core and rsverbs then take their write() and sysfs fallbacks on the
 * real kernel. Only that one ioctl request is refused. */
#include "common.h"

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: noioctl ENOTTY|EPROTONOSUPPORT PROGRAM [ARGS...]\n");
		return 2;
	}
	unsigned err = !strcmp(argv[1], "ENOTTY") ? ENOTTY : !strcmp(argv[1], "EPROTONOSUPPORT") ? EPROTONOSUPPORT : 0;
	if (!err) {
		fprintf(stderr, "noioctl: unknown errno %s\n", argv[1]);
		return 2;
	}
	if (install_filter(err, -1, 0))
		return 2;
	execvp(argv[2], argv + 2);
	perror("noioctl: exec");
	return 127;
}
