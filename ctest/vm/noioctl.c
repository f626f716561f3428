/* noioctl ERRNO PROGRAM [ARGS...]: runs PROGRAM with a seccomp filter that
 * makes ioctl(fd, RDMA_VERBS_IOCTL, ...) fail with ERRNO (ENOTTY = a kernel
 * without the ioctl framework; EPROTONOSUPPORT = one without the method).
 * rdma-core and rsverbs then take their write() and sysfs fallbacks on the
 * real kernel. Only that one ioctl request is refused. */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#define RDMA_VERBS_IOCTL 0xc0181b01u

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
	struct sock_filter f[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_ioctl, 0, 3),
		/* the low 32 bits of the request (x86_64 is little-endian) */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[1])),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, RDMA_VERBS_IOCTL, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (err & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(f) / sizeof(f[0]), .filter = f };
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog)) {
		perror("noioctl: seccomp");
		return 2;
	}
	execvp(argv[2], argv + 2);
	perror("noioctl: exec");
	return 127;
}
