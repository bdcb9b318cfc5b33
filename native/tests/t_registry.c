/* The instance registry ($SOFTRDMA_RUNDIR): entries left by killed processes or anything else
 * found in the directory are skipped, never trusted. softrdma only (the kernel has no registry). */
#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* a private registry directory per test, named after the runner so its teardown can remove it */
static void regdir_path(char *buf, size_t len, pid_t runner, const char *tag) {
    snprintf(buf, len, "/tmp/softrdma-regtest-%d-%s", (int)runner, tag);
}

static void regdir_remove(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    char p[512];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (unlink(p)) rmdir(p);
    }
    closedir(d);
    rmdir(dir);
}

static void regdir_setup(char *buf, size_t len, const char *tag) {
    if (!sr_object_count) SKIP("not the softrdma device (no registry)");
    regdir_path(buf, len, getppid(), tag);
    regdir_remove(buf);
    CHECK(mkdir(buf, 0700) == 0, "mkdir %s: %s", buf, strerror(errno));
    CHECK(setenv("SOFTRDMA_RUNDIR", buf, 1) == 0, "setenv");
}

static void put_file(const char *dir, const char *name, const void *data, size_t len) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    CHECK(fd >= 0, "create %s: %s", p, strerror(errno));
    CHECK(write(fd, data, len) == (ssize_t)len, "write %s", p);
    close(fd);
}

static void read_file(const char *dir, const char *name, char *buf, size_t len) {
    char p[512];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    int fd = open(p, O_RDONLY);
    CHECK(fd >= 0, "open %s: %s", p, strerror(errno));
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
}

/* a pid that no process has: a child that has exited and been reaped */
static pid_t dead_pid(void) {
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

/* one local QP pair and a SEND between them: the device works */
static void local_send(struct dev *d) {
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d->ctx));
    struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d->ctx, 8, NULL, NULL, 0));
    struct ibv_qp *qp[2];
    for (int i = 0; i < 2; i++) {
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        ia.send_cq = ia.recv_cq = cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = ia.cap.max_recv_wr = 2;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        qp[i] = CHECK_PTR(ibv_create_qp(pd, &ia));
        qp_to_init(qp[i], d->port);
    }
    for (int i = 0; i < 2; i++) {
        qp_to_rtr(qp[i], d, qp[i ^ 1]->qp_num, 0, 1);
        qp_to_rts(qp[i], d, 0, 14, 7, 7);
    }
    uint8_t *buf = xalloc(4096);
    struct ibv_mr *mr = reg(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    fill_pattern(buf, 100, 3);
    post_recv(qp[1], 2, buf + 2048, 1024, mr->lkey);
    post_send(qp[0], 1, IBV_WR_SEND, buf, 100, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    for (int k = 0; k < 2; k++) {
        struct ibv_wc wc = wait_wc(cq, 10000);
        if (wc.wr_id == 1) check_wc_ok(&wc, 1, IBV_WC_SEND, qp[0]->qp_num, WC_ANY_LEN, 0, 0);
        else check_wc_ok(&wc, 2, IBV_WC_RECV, qp[1]->qp_num, 100, 0, 0);
    }
    CHECK(check_pattern(buf + 2048, 100, 3), "data");
    for (int i = 0; i < 2; i++) CHECK_OK(ibv_destroy_qp(qp[i]));
    dereg(mr);
    CHECK_OK(ibv_destroy_cq(cq));
    CHECK_OK(ibv_dealloc_pd(pd));
}

static void malformed_teardown(void) {
    char dir[256];
    regdir_path(dir, sizeof dir, getpid(), "malformed");
    regdir_remove(dir);
}

/* entries that are not regular files, empty, garbage or left by a dead process: the device
 * opens and takes the first regular entry no live process holds */
SR_TEST_FULL(registry_malformed_entries, "registry_malformed_entries", 30, malformed_teardown) {
    char dir[256], p[512], got[64];
    regdir_setup(dir, sizeof dir, "malformed");
    snprintf(p, sizeof p, "%s/1", dir); /* a directory */
    CHECK(mkdir(p, 0700) == 0, "mkdir %s", p);
    snprintf(p, sizeof p, "%s/2", dir); /* a FIFO (an open for reading would block) */
    CHECK(mkfifo(p, 0600) == 0, "mkfifo %s", p);
    snprintf(p, sizeof p, "%s/3", dir); /* a symlink */
    CHECK(symlink("/dev/null", p) == 0, "symlink %s", p);
    snprintf(p, sizeof p, "%s/4", dir); /* a dangling symlink */
    CHECK(symlink("/nonexistent/softrdma", p) == 0, "symlink %s", p);
    put_file(dir, "5", "", 0);                    /* truncated by a process killed while claiming it */
    put_file(dir, "6", "\xff\x00garbage\n", 10);  /* garbage */
    char stale[64];
    int n = snprintf(stale, sizeof stale, "%d 1\n", (int)dead_pid());
    put_file(dir, "7", stale, n); /* left by a dead process */

    struct dev d;
    dev_open(&d);
    local_send(&d);
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d.ctx, 4, NULL, NULL, 0));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    struct ibv_qp *qp = CHECK_PTR(ibv_create_qp(pd, &ia));
    unsigned inst = qp->qp_num >> 16;
    CHECK_OK(ibv_destroy_qp(qp));
    CHECK_OK(ibv_destroy_cq(cq));
    CHECK_OK(ibv_dealloc_pd(pd));
    CHECK(inst == 5, "instance %u, expected 5 (the first regular entry)", inst);
    read_file(dir, "5", got, sizeof got);
    int pid = 0;
    unsigned port = 0;
    CHECK(sscanf(got, "%d %u", &pid, &port) == 2 && pid == getpid() && port > 0 && port < 65536,
          "entry 5 says '%s', expected '%d <port>'", got, (int)getpid());
    /* the planted entries are left as they were */
    struct stat st;
    snprintf(p, sizeof p, "%s/1", dir);
    CHECK(stat(p, &st) == 0 && S_ISDIR(st.st_mode), "entry 1 is still a directory");
    snprintf(p, sizeof p, "%s/2", dir);
    CHECK(lstat(p, &st) == 0 && S_ISFIFO(st.st_mode), "entry 2 is still a FIFO");
    snprintf(p, sizeof p, "%s/3", dir);
    CHECK(lstat(p, &st) == 0 && S_ISLNK(st.st_mode), "entry 3 is still a symlink");
    dev_close(&d);
}

static void peer_teardown(void) {
    char dir[256];
    regdir_path(dir, sizeof dir, getpid(), "peer");
    regdir_remove(dir);
}

/*
 * QPs whose destination instance has a stale, malformed or no registry entry: every SEND completes
 * with RETRY_EXC_ERR at once, and the port a stale entry names is not contacted (it may belong to
 * another program by now).
 */
SR_TEST_FULL(registry_stale_peer_entry, "registry_stale_peer_entry", 30, peer_teardown) {
    char dir[256], p[512];
    regdir_setup(dir, sizeof dir, "peer");
    /* some program listening on the port a dead instance once had */
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    CHECK(lfd >= 0, "socket");
    struct sockaddr_in sa = test_sockaddr(0);
    socklen_t sl = sizeof sa;
    CHECK(bind(lfd, (struct sockaddr *)&sa, sizeof sa) == 0 && listen(lfd, 8) == 0 &&
              getsockname(lfd, (struct sockaddr *)&sa, &sl) == 0,
          "listen: %s", strerror(errno));
    char stale[64];
    int n = snprintf(stale, sizeof stale, "%d %u\n", (int)dead_pid(), (unsigned)ntohs(sa.sin_port));
    put_file(dir, "200", stale, n);
    put_file(dir, "201", "\xff\xfe garbage", 10);
    put_file(dir, "202", "", 0);
    snprintf(p, sizeof p, "%s/203", dir);
    CHECK(mkdir(p, 0700) == 0, "mkdir %s", p);
    snprintf(p, sizeof p, "%s/204", dir);
    CHECK(mkfifo(p, 0600) == 0, "mkfifo %s", p);
    const unsigned dest_inst[] = {200, 201, 202, 203, 204, 255};
    enum { N = sizeof dest_inst / sizeof *dest_inst };

    struct dev d;
    dev_open(&d);
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d.ctx, 2 * N, NULL, NULL, 0));
    uint8_t *buf = xalloc(4096);
    struct ibv_mr *mr = reg(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_qp *qp[N];
    double t0 = now_ms();
    for (int i = 0; i < N; i++) {
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        ia.send_cq = ia.recv_cq = cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        qp[i] = CHECK_PTR(ibv_create_qp(pd, &ia));
        qp_to_init(qp[i], d.port);
        qp_to_rtr(qp[i], &d, dest_inst[i] << 16 | 1, 0, 1);
        qp_to_rts(qp[i], &d, 0, 1, 1, 1);
        post_send(qp[i], i, IBV_WR_SEND, buf, 16, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    }
    for (int k = 0; k < N; k++) {
        struct ibv_wc wc = wait_wc(cq, 10000);
        CHECK(wc.wr_id < N, "wr_id %llu", (unsigned long long)wc.wr_id);
        check_wc_err(&wc, wc.wr_id, IBV_WC_RETRY_EXC_ERR, qp[wc.wr_id]->qp_num);
    }
    double dt = now_ms() - t0;
    int c = accept(lfd, NULL, NULL);
    CHECK(c < 0 && (errno == EAGAIN || errno == EWOULDBLOCK),
          "the port named by a stale registry entry was contacted (accept returned %d)", c);
    CHECK(dt < 2500, "%d unreachable peers took %.0f ms (a stale entry's port was waited on?)", N, dt);
    LOG("%d QPs to unregistered instances failed in %.0f ms", N, dt);
    close(lfd);
    for (int i = 0; i < N; i++) CHECK_OK(ibv_destroy_qp(qp[i]));
    dereg(mr);
    CHECK_OK(ibv_destroy_cq(cq));
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
}

/* a SOFTRDMA_RUNDIR longer than the device can use: ibv_open_device fails with a message, no
 * other directory is used instead */
TEST(registry_dir_too_long, 20) {
    if (!sr_object_count) SKIP("not the softrdma device (no registry)");
    char longdir[400];
    memset(longdir, 'x', sizeof longdir - 1);
    memcpy(longdir, "/tmp/softrdma-regtest-", 22);
    longdir[sizeof longdir - 1] = 0;
    CHECK(setenv("SOFTRDMA_RUNDIR", longdir, 1) == 0, "setenv");
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    CHECK(list && n > 0, "ibv_get_device_list");
    errno = 0;
    struct ibv_context *ctx = ibv_open_device(list[0]);
    int err = errno;
    if (ctx) ibv_close_device(ctx);
    ibv_free_device_list(list);
    CHECK(ctx == NULL, "ibv_open_device with a %zu-character SOFTRDMA_RUNDIR succeeded", strlen(longdir));
    CHECK(err == ENAMETOOLONG, "errno %d (%s), expected ENAMETOOLONG", err, strerror(err));
}
