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
#include <string.h>
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

/*
 * memcpy for payloads. From 2112 bytes up to about a megabyte glibc copies
 * with `rep movsb` on CPUs that say it is fast (ERMS, FSRM), and on the
 * development VM's AMD EPYC (AVX-512, FSRM) that is 10 to 25 times slower when
 * the destination lies 1 to 63 bytes after the source modulo 4 KiB: 4 KiB at a
 * distance of 8 took 1.2-1.7 us instead of 45 ns, 64 KiB 21 us instead of 1.2,
 * 512 KiB 160 us instead of 11 (a C loop on that VM). The transport's receive
 * slots, an 8-byte header in front of the payload, put every SEND from an
 * aligned buffer exactly there, and ring and shared-memory offsets fall there
 * now and then. Such copies go in pieces below glibc's threshold, which it
 * copies with vector loads and stores at the usual speed; others, and those of
 * a megabyte or more (another path), go whole.
 */
#define SR_COPY_PIECE 2048
static inline void sr_copy(void *dst, const void *src, size_t len)
{
	uintptr_t distance = ((uintptr_t)dst - (uintptr_t)src) & 4095;
	uint8_t *d = dst;
	const uint8_t *s = src;

	if (len <= SR_COPY_PIECE || distance == 0 || distance >= 64 || len >= (1u << 20)) {
		memcpy(dst, src, len);
		return;
	}
	while (len > SR_COPY_PIECE) {
		memcpy(d, s, SR_COPY_PIECE);
		d += SR_COPY_PIECE;
		s += SR_COPY_PIECE;
		len -= SR_COPY_PIECE;
	}
	memcpy(d, s, len);
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
