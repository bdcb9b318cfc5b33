/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by both libraries (libibverbs.so.1 and librdmacm.so.1): the
 * CM cannot call the verbs library's hidden functions, so each library gets
 * its own inline copy of one definition (sr_device.c, sr_shm.c, sr_cm_*.c).
 */
#ifndef SR_UTIL_H
#define SR_UTIL_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

/* monotonic time in nanoseconds */
static inline uint64_t sr_clock_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* a spin-wait iteration */
static inline void sr_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
	__builtin_ia32_pause();
#elif defined(__aarch64__)
	__asm__ __volatile__("yield");
#endif
}

/* random bits for keys and PSNs; without entropy (early boot) a mix of clock and pid */
static inline uint64_t sr_entropy64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = sr_clock_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
	return v;
}

/* SOFTRDMA_DEBUG set and not "0": trace to stderr */
static inline int sr_debug_env(void)
{
	const char *d = getenv("SOFTRDMA_DEBUG");

	return d && *d && *d != '0';
}

/* the SOFTRDMA_DEBUG trace line: "<who>[pid]: ..." */
#define SR_TRACE(on, who, fmt, ...) do { if (on) \
	fprintf(stderr, who "[%d]: " fmt "\n", (int)getpid(), ##__VA_ARGS__); } while (0)

#endif
