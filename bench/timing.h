/* Shared by the benchmark programs (bench.c, curve.c, spawn.c): the clocks
 * and the qsort comparators. */
#ifndef RSVERBS_BENCH_TIMING_H
#define RSVERBS_BENCH_TIMING_H
#include <stdint.h>
#include <time.h>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

/* A cheap, monotonic tick counter for one timed call, converted to ns
 * against mono_ns() over the whole run: the TSC on x86; the virtual count
 * register CNTVCT_EL0 on aarch64 (readable at EL0 under Linux, arm64's
 * arch_timer: ARCH_TIMER_USR_VCT_ACCESS_EN); the time base on powerpc64
 * (mftb); the TOD clock on s390x (stckf); else CLOCK_MONOTONIC itself. */
static inline uint64_t ticks(void)
{
#if defined(__x86_64__) || defined(__i386__)
	return __rdtsc();
#elif defined(__aarch64__)
	uint64_t v;
	__asm__ __volatile__("isb; mrs %0, cntvct_el0" : "=r"(v) : : "memory");
	return v;
#elif defined(__powerpc64__)
	uint64_t v;
	__asm__ __volatile__("mftb %0" : "=r"(v) : : "memory");
	return v;
#elif defined(__s390x__)
	uint64_t v;
	__asm__ __volatile__("stckf %0" : "=Q"(v) : : "cc", "memory");
	return v;
#else
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
#endif
}

/* CLOCK_MONOTONIC in nanoseconds. */
static inline uint64_t mono_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static inline int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

static inline int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}
#endif
