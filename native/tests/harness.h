/* Tiny test harness for the softrdma conformance suite.
 * Each test runs in its own forked child (own process group) under alarm(); a crash, hang or
 * failed check fails that one test only. */
#ifndef SR_HARNESS_H
#define SR_HARNESS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>

struct sr_test {
    const char *name;
    void (*fn)(void);
    int timeout_s;
    void (*teardown)(void); /* runs in the runner process after the child ended (any outcome) */
    struct sr_test *next;
};

void sr_register(struct sr_test *t);

#define SR_TEST_FULL(ident, sname, tmo, td)                                                   \
    static void ident(void);                                                                  \
    static struct sr_test ident##_desc = {sname, ident, tmo, td, NULL};                       \
    __attribute__((constructor)) static void ident##_reg(void) { sr_register(&ident##_desc); } \
    static void ident(void)

#define TEST(ident, tmo) SR_TEST_FULL(ident, #ident, tmo, NULL)

/* A test body run over both connection kinds: "<name>/verbs" and "<name>/cm". */
#define TEST_BOTH(ident, tmo)                                      \
    static void ident(int kind);                                   \
    SR_TEST_FULL(ident##_v, #ident "/verbs", tmo, NULL) { ident(CONN_VERBS); } \
    SR_TEST_FULL(ident##_c, #ident "/cm", tmo, NULL) { ident(CONN_CM); }       \
    static void ident(int kind)

extern int sr_verbose;
extern const char *sr_current; /* name of the running test */

__attribute__((noreturn, format(printf, 3, 4))) void sr_fail(const char *file, int line, const char *fmt, ...);
__attribute__((noreturn, format(printf, 1, 2))) void sr_skip(const char *fmt, ...);
__attribute__((format(printf, 1, 2))) void sr_log(const char *fmt, ...);

#define FAIL(...) sr_fail(__FILE__, __LINE__, __VA_ARGS__)
#define SKIP(...) sr_skip(__VA_ARGS__)
#define LOG(...) sr_log(__VA_ARGS__)
#define CHECK(cond, fmt, ...)                                                                    \
    do {                                                                                         \
        if (!(cond)) sr_fail(__FILE__, __LINE__, "check failed: %s: " fmt, #cond, ##__VA_ARGS__); \
    } while (0)
/* call returning 0 on success (errno-style or -1+errno) */
#define CHECK_OK(call)                                                                   \
    do {                                                                                 \
        errno = 0;                                                                       \
        long sr_rc_ = (long)(call);                                                      \
        if (sr_rc_ != 0)                                                                 \
            sr_fail(__FILE__, __LINE__, "%s returned %ld (errno %d %s)", #call, sr_rc_, errno, \
                    strerror(sr_rc_ > 0 ? (int)sr_rc_ : errno));                          \
    } while (0)
#define CHECK_PTR(expr)                                                                 \
    ({                                                                                  \
        errno = 0;                                                                      \
        __typeof__(expr) sr_p_ = (expr);                                                \
        if (!sr_p_) sr_fail(__FILE__, __LINE__, "%s returned NULL (errno %d %s)", #expr, errno, strerror(errno)); \
        sr_p_;                                                                          \
    })
#define CHECK_EQ(a, b)                                                                     \
    do {                                                                                   \
        long long sr_a_ = (long long)(a), sr_b_ = (long long)(b);                          \
        if (sr_a_ != sr_b_)                                                                \
            sr_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", #a, sr_a_, #b, sr_b_); \
    } while (0)

/* leak check: set by the cm helpers (librdmacm may keep device contexts open by design) */
extern int sr_used_cm;
/* softrdma_object_count, or NULL when not running on the software device */
extern long (*sr_object_count)(const char *kind);
/* FAILs if any softrdma object is left (no-op without softrdma_object_count) */
void sr_leak_check(void);

#endif
