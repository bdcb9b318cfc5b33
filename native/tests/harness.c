/* Runner: fork per test, alarm() timeout, process-group kill, summary. */
#include "harness.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int sr_verbose;
const char *sr_current = "";
int sr_used_cm;
long (*sr_object_count)(const char *kind);

static struct sr_test *head, **tail = &head;
/* present only in sanitizer builds: children leave with _exit(), so run the leak check explicitly */
extern int __lsan_do_recoverable_leak_check(void) __attribute__((weak));
static int result_fd = -1; /* child -> runner: reason text */

void sr_register(struct sr_test *t) {
    *tail = t;
    tail = &t->next;
}

static void put_result(const char *s) {
    if (result_fd >= 0) {
        ssize_t r = write(result_fd, s, strlen(s));
        (void)r;
    }
}

void sr_fail(const char *file, int line, const char *fmt, ...) {
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "%s:%d: ", file, line);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg + n, sizeof msg - n, fmt, ap);
    va_end(ap);
    fprintf(stderr, "  [%s] (pid %d) FAIL %s\n", sr_current, getpid(), msg);
    if (strcmp(sr_current, "") && getpid() != getpgrp()) { /* a helper process of the test: say which */
        char tagged[1100];
        snprintf(tagged, sizeof tagged, "[%s] %s; ", sr_current, msg);
        put_result(tagged);
    } else
        put_result(msg);
    _exit(1);
}

void sr_skip(const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    put_result(msg);
    _exit(77);
}

void sr_log(const char *fmt, ...) {
    if (!sr_verbose) return;
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "  [%s] ", sr_current);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static const char *kinds[] = {"context", "pd", "mr", "cq", "comp_channel", "qp", "srq", "cm_id", "cm_channel", "mw"};

/* After the test body: every object count must be back to zero (polls up to 2 s for
 * asynchronous teardown). librdmacm keeps device contexts open by design, so after rdma_cm use
 * "context" may stay at most at the number of devices. */
void sr_leak_check(void) {
    if (!sr_object_count) return;
    char buf[512];
    for (int tries = 0; tries < 200; tries++) {
        buf[0] = 0;
        int bad = 0;
        for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
            long c = sr_object_count(kinds[i]);
            long allowed = 0;
            if (sr_used_cm && !strcmp(kinds[i], "context")) allowed = 64;
            if (c > allowed || c < 0) {
                bad = 1;
                snprintf(buf + strlen(buf), sizeof buf - strlen(buf), " %s=%ld", kinds[i], c);
            }
        }
        if (!bad) return;
        usleep(10000);
    }
    sr_fail(__FILE__, __LINE__, "leak check: objects left after cleanup:%s", buf);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int matches(const char *name, char **pats, int npats) {
    if (npats == 0) return 1;
    for (int i = 0; i < npats; i++) {
        size_t l = strlen(pats[i]);
        if (!strcmp(name, pats[i])) return 1;
        if (!strncmp(name, pats[i], l) && name[l] == '/') return 1;
        if (l && pats[i][l - 1] == '*' && !strncmp(name, pats[i], l - 1)) return 1;
    }
    return 0;
}

static int skipped_by_env(const char *name) {
    const char *s = getenv("SOFTRDMA_TEST_SKIP"); /* comma-separated names/prefixes */
    if (!s || !*s) return 0;
    char *dup = strdup(s), *save = NULL;
    int hit = 0;
    for (char *tok = strtok_r(dup, ",", &save); tok && !hit; tok = strtok_r(NULL, ",", &save)) {
        char *p = tok;
        hit = matches(name, &p, 1);
    }
    free(dup);
    return hit;
}

int main(int argc, char **argv) {
    char *pats[64];
    int npats = 0, list = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v")) sr_verbose = 1;
        else if (!strcmp(argv[i], "-l")) list = 1;
        else if (!strcmp(argv[i], "-t") && i + 1 < argc && npats < 64) pats[npats++] = argv[++i];
        else {
            fprintf(stderr, "usage: %s [-v] [-l] [-t name]...\n  -t name: run that test (or all 'name/...' variants; 'prefix*' allowed)\n", argv[0]);
            return 2;
        }
    }
    if (list) {
        for (struct sr_test *t = head; t; t = t->next) printf("%s\n", t->name);
        return 0;
    }
    *(void **)&sr_object_count = dlsym(RTLD_DEFAULT, "softrdma_object_count");
    if (getenv("SOFTRDMA_TEST_TIMEOUT_SCALE") == NULL) setenv("SOFTRDMA_TEST_TIMEOUT_SCALE", "1", 0);
    int scale = atoi(getenv("SOFTRDMA_TEST_TIMEOUT_SCALE"));
    if (scale < 1) scale = 1;
    printf("softrdma conformance tests (device: %s, addr %s)\n",
           sr_object_count ? "softrdma (leak checks on)" : "not softrdma (leak checks skipped)",
           getenv("SOFTRDMA_TEST_ADDR") ? getenv("SOFTRDMA_TEST_ADDR") : "127.0.0.1");
    int passed = 0, failed = 0, skipped = 0, ran = 0;
    char failed_names[8192] = "", skipped_lines[16384] = "";
    for (struct sr_test *t = head; t; t = t->next) {
        if (!matches(t->name, pats, npats)) continue;
        ran++;
        if (skipped_by_env(t->name)) {
            skipped++;
            printf("SKIP %s: listed in SOFTRDMA_TEST_SKIP\n", t->name);
            snprintf(skipped_lines + strlen(skipped_lines), sizeof skipped_lines - strlen(skipped_lines),
                     "  %s: listed in SOFTRDMA_TEST_SKIP\n", t->name);
            continue;
        }
        int pfd[2], efd[2];
        if (pipe2(pfd, O_CLOEXEC) || pipe2(efd, O_CLOEXEC)) { perror("pipe"); return 2; }
        fflush(stdout);
        fflush(stderr);
        double t0 = now_s();
        pid_t pid = fork();
        if (pid < 0) { perror("fork"); return 2; }
        if (pid == 0) {
            setpgid(0, 0);
            close(pfd[0]);
            close(efd[0]);
            dup2(efd[1], 2); /* stderr through the runner: it scans for sanitizer reports */
            close(efd[1]);
            result_fd = pfd[1];
            sr_current = t->name;
            signal(SIGPIPE, SIG_IGN);
            alarm(t->timeout_s * scale);
            t->fn();
            sr_leak_check();
            if (__lsan_do_recoverable_leak_check && __lsan_do_recoverable_leak_check())
                sr_fail(__FILE__, __LINE__, "LeakSanitizer: memory leaked during the test (report above)");
            _exit(0);
        }
        setpgid(pid, pid);
        close(pfd[1]);
        close(efd[1]);
        fcntl(efd[0], F_SETFL, O_NONBLOCK);
        size_t elen = 0;
        int sanitizer = 0;
        char etail[256] = ""; /* last bytes of the previous chunk, so markers split across reads are found */
        char reason[1024] = "";
        size_t rlen = 0;
        int status = 0;
        /* the child has its own alarm; this is the backstop */
        double deadline = t0 + t->timeout_s * scale + 15;
        for (int done = 0;;) {
            pid_t w = done ? pid : waitpid(pid, &status, WNOHANG);
            if (w == pid && !done) {
                done = 1;
                kill(-pid, SIGKILL); /* leftover helper processes of this test (its own process group) */
                while (waitpid(-pid, NULL, WNOHANG) > 0) {}
            }
            struct pollfd p[2] = {{pfd[0], POLLIN, 0}, {efd[0], POLLIN, 0}};
            poll(p, 2, done ? 0 : 20);
            if ((p[0].revents & POLLIN) && rlen < sizeof reason - 1) {
                ssize_t r = read(pfd[0], reason + rlen, sizeof reason - 1 - rlen);
                if (r > 0) rlen += r;
            }
            int eof = 0;
            for (;;) {
                char buf[4096 + 256];
                size_t tl = strlen(etail);
                memcpy(buf, etail, tl);
                ssize_t r = read(efd[0], buf + tl, 4096);
                if (r <= 0) {
                    eof = r == 0;
                    break;
                }
                ssize_t wr = write(2, buf + tl, r);
                (void)wr;
                elen += r;
                buf[tl + r] = 0;
                if (strstr(buf, "ERROR: AddressSanitizer") || strstr(buf, "ERROR: LeakSanitizer") ||
                    strstr(buf, "runtime error:") || strstr(buf, "WARNING: ThreadSanitizer"))
                    sanitizer = 1;
                size_t keep = tl + r < 200 ? tl + r : 200;
                memmove(etail, buf + tl + r - keep, keep);
                etail[keep] = 0;
            }
            if (done && (eof || now_s() > deadline + 5)) break;
            if (now_s() > deadline) kill(-pid, SIGKILL);
        }
        close(efd[0]);
        for (;;) {
            ssize_t r = rlen < sizeof reason - 1 ? read(pfd[0], reason + rlen, sizeof reason - 1 - rlen) : 0;
            if (r <= 0) break;
            rlen += r;
        }
        reason[rlen] = 0;
        close(pfd[0]);
        (void)elen;
        if (t->teardown) t->teardown();
        double dt = now_s() - t0;
        if (sanitizer && !(WIFEXITED(status) && WEXITSTATUS(status) == 77) && !(WIFEXITED(status) && WEXITSTATUS(status) != 0 && rlen)) {
            /* a sanitizer report from the test or a helper (possibly a library thread racing with exit) */
            failed++;
            printf("FAIL %s (%.2fs): sanitizer report in the test's stderr (above)%s%s\n", t->name, dt, rlen ? ": " : "", reason);
            snprintf(failed_names + strlen(failed_names), sizeof failed_names - strlen(failed_names),
                     "  %s: sanitizer report in stderr\n", t->name);
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
            passed++;
            printf("PASS %s (%.2fs)\n", t->name, dt);
        } else if (WIFEXITED(status) && WEXITSTATUS(status) == 77) {
            skipped++;
            printf("SKIP %s: %s\n", t->name, reason);
            snprintf(skipped_lines + strlen(skipped_lines), sizeof skipped_lines - strlen(skipped_lines),
                     "  %s: %s\n", t->name, reason);
        } else {
            failed++;
            char why[1200];
            if (WIFSIGNALED(status))
                snprintf(why, sizeof why, "%s (%s)%s%s", WTERMSIG(status) == SIGALRM ? "timeout" : "crashed",
                         strsignal(WTERMSIG(status)), rlen ? ": " : "", reason);
            else
                snprintf(why, sizeof why, "%s", rlen ? reason : "exit status nonzero");
            if (!rlen && WIFEXITED(status)) {
                int x = WEXITSTATUS(status);
                snprintf(why, sizeof why, "%s (exit status %d; see stderr above)",
                         x == 86 ? "AddressSanitizer report" : x == 87 ? "UndefinedBehaviorSanitizer report"
                                                                       : "died without a message (e.g. a missing symbol)",
                         x);
            }
            printf("FAIL %s (%.2fs): %s\n", t->name, dt, why);
            snprintf(failed_names + strlen(failed_names), sizeof failed_names - strlen(failed_names), "  %s: %s\n",
                     t->name, why);
        }
        fflush(stdout);
    }
    if (ran == 0) {
        fprintf(stderr, "no test matches\n");
        return 2;
    }
    if (failed) printf("\nfailed:\n%s", failed_names);
    if (skipped) printf("\nskipped:\n%s", skipped_lines);
    printf("\n%d passed, %d failed\n", passed, failed);
    if (skipped) printf("%d skipped\n", skipped);
    return failed ? 1 : 0;
}
