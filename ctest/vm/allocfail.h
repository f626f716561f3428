/* Failing librsverbs.so.1's allocations on purpose (docs/security.md,
 * promise 16): ctest/vm/nomem.c fails every one, ctest/vm/faults.c the
 * N-th. Include it from one file of a program only: it defines malloc,
 * calloc, realloc and posix_memalign, and the dynamic linker binds every
 * object's calls to them (the executable comes first in the lookup scope,
 * before LD_PRELOAD's objects and the libraries). Each forwards to
 * glibc's __libc_* entry, unless the calling thread's window is open
 * (alloc_fail_armed), the caller's return address lies in librsverbs
 * (dladdr), and the
 * allocation is one to fail: then it returns NULL (posix_memalign:
 * ENOMEM) with errno ENOMEM. rdma-core's own allocations never fail, so
 * the objects it creates are the same in every run. free is glibc's. */
#ifndef RSVERBS_CTEST_ALLOCFAIL_H
#define RSVERBS_CTEST_ALLOCFAIL_H

#include <dlfcn.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

/* ALLOC_FAIL_EVERY in `nth`: every allocation of the library fails. */
#define ALLOC_FAIL_EVERY (-1)

/* The window, per thread: the library's allocations are counted while it
 * is open. Another thread's allocations (faults.c's supervising thread)
 * neither count nor call dladdr, whose loader lock the verb's thread may
 * want meanwhile. */
static __thread int alloc_fail_armed;

static struct {
	int nth;            /* 0: none fails; N: the N-th in the window; ALLOC_FAIL_EVERY */
	volatile int seen;  /* the library's allocations in the window */
	volatile int failed; /* of which failed */
} alloc_fail;

/* Whether the allocation is rsverbs' and must fail (counted either way). */
static int alloc_fails(void *caller)
{
	Dl_info info;
	if (!alloc_fail_armed)
		return 0;
	if (!dladdr(caller, &info) || !info.dli_fname || !strstr(info.dli_fname, "librsverbs"))
		return 0;
	int n = ++alloc_fail.seen;
	if (alloc_fail.nth != ALLOC_FAIL_EVERY && alloc_fail.nth != n)
		return 0;
	alloc_fail.failed++;
	errno = ENOMEM;
	return 1;
}

void *malloc(size_t n)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __libc_malloc(n);
}

void *calloc(size_t n, size_t m)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __libc_calloc(n, m);
}

void *realloc(void *p, size_t n)
{
	return alloc_fails(__builtin_return_address(0)) ? NULL : __libc_realloc(p, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
	if (alloc_fails(__builtin_return_address(0)))
		return ENOMEM;
	*out = __libc_memalign(align, n);
	return *out ? 0 : ENOMEM;
}

#endif
