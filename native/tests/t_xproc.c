/* 8. cross-process (server in a forked child), peer killed; 9. two network namespaces */
#include <fcntl.h>
#include <sched.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define TMO 10000
#define LW IBV_ACCESS_LOCAL_WRITE
#define REGION (1u << 20)
#define MAGIC 0x5352444du

struct xinfo {
    uint64_t addr;
    uint32_t rkey;
    uint32_t len;
};

static void write_all(int fd, const void *p, size_t n) {
    if (write(fd, p, n) != (ssize_t)n) FAIL("pipe write: %s", strerror(errno));
}

static void read_all(int fd, void *p, size_t n, int timeout_ms) {
    size_t got = 0;
    while (got < n) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, timeout_ms) <= 0) FAIL("peer process did not answer within %d ms", timeout_ms);
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0) FAIL("peer process closed the pipe (it failed or died)");
        got += r;
    }
}

/* server side, in a child process; exits through FAIL (status 1) or returns normally */
static void xserver(const char *addr, int wfd, int mode_wait_kill) {
    sr_current = mode_wait_kill ? "server(victim)" : "server";
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *listen;
    CHECK_OK(rdma_create_id(ec, &listen, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    CHECK(inet_pton(AF_INET, addr, &sa.sin_addr) == 1, "addr");
    CHECK_OK(rdma_bind_addr(listen, (struct sockaddr *)&sa));
    CHECK_OK(rdma_listen(listen, 4));
    uint16_t port = ntohs(rdma_get_src_port(listen));
    CHECK(port, "port");
    write_all(wfd, &port, sizeof port);
    struct rdma_cm_event *ev = cm_expect(ec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    struct rdma_cm_id *sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    struct qp_opts o;
    qp_opts_default(&o);
    struct ep e;
    memset(&e, 0, sizeof e);
    cm_ep_setup(&e, sid, ec, &o);
    uint8_t *region = xalloc(REGION), *rbuf = xalloc(4 * 4096), *sbuf = xalloc(4096);
    fill_pattern(region, REGION / 2, 7);
    struct ibv_mr *mr = reg(e.pd, region, REGION, LW | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
    struct ibv_mr *rmr = reg(e.pd, rbuf, 4 * 4096, LW), *smr = reg(e.pd, sbuf, 4096, LW);
    for (int i = 0; i < (mode_wait_kill ? 1 : 4); i++) post_recv(e.qp, i, rbuf + i * 4096, 4096, rmr->lkey);
    struct xinfo xi = {(uintptr_t)region, mr->rkey, REGION};
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.private_data = &xi;
    cp.private_data_len = sizeof xi;
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    CHECK_OK(rdma_accept(sid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    if (mode_wait_kill) {
        struct ibv_wc wc = wait_wc(e.rcq, TMO);
        check_wc_ok(&wc, 0, IBV_WC_RECV, e.qp->qp_num, 16, 0, 0);
        char c = 'r';
        write_all(wfd, &c, 1);
        for (;;) pause(); /* killed by the client */
    }
    struct ibv_wc wc = wait_wc(e.rcq, TMO);
    check_wc_ok(&wc, 0, IBV_WC_RECV, e.qp->qp_num, 1000, 0, 0);
    CHECK(check_pattern(rbuf, 1000, 1), "SEND data");
    wc = wait_wc(e.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV_RDMA_WITH_IMM, e.qp->qp_num, 65536, 1, htonl(0xC0FFEE01));
    CHECK(check_pattern(region + REGION / 2, 65536, 2), "WRITE_WITH_IMM data");
    uint32_t m = MAGIC;
    memcpy(sbuf, &m, 4);
    post_send(e.qp, 10, IBV_WR_SEND, sbuf, 4, smr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    wc = wait_wc(e.scq, TMO);
    check_wc_ok(&wc, 10, IBV_WC_SEND, e.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_DISCONNECTED, 30000)));
    rdma_disconnect(sid);
    for (int i = 2; i < 4; i++) { /* remaining receives flush */
        wc = wait_wc(e.rcq, TMO);
        check_wc_err(&wc, i, IBV_WC_WR_FLUSH_ERR, e.qp->qp_num);
    }
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(sid));
    CHECK_OK(rdma_destroy_id(listen));
    rdma_destroy_event_channel(ec);
}

static pid_t spawn_server(const char *addr, const char *netns, int mode, int *rfd) {
    int pfd[2];
    CHECK_OK(pipe(pfd));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(pfd[0]);
        if (netns) {
            char path[128];
            snprintf(path, sizeof path, "/run/netns/%s", netns);
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd < 0 || setns(fd, CLONE_NEWNET)) FAIL("setns %s: %s", path, strerror(errno));
            close(fd);
        }
        alarm(60);
        xserver(addr, pfd[1], mode);
        sr_leak_check();
        _exit(0);
    }
    close(pfd[1]);
    *rfd = pfd[0];
    return pid;
}

static void wait_child_ok(pid_t pid, int timeout_ms) {
    double end = now_ms() + timeout_ms;
    int st;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            FAIL("server process did not finish within %d ms", timeout_ms);
        }
        msleep(5);
    }
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        FAIL("server process failed (%s %d)", WIFEXITED(st) ? "exit" : "signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* client side of the exchange: SEND, WRITE_WITH_IMM, READ, receive the server's reply */
static void xclient(const char *addr, int rfd) {
    uint16_t port;
    read_all(rfd, &port, sizeof port, TMO);
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *cid = cm_resolve(ec, addr, port);
    struct qp_opts o;
    qp_opts_default(&o);
    struct ep e;
    memset(&e, 0, sizeof e);
    cm_ep_setup(&e, cid, ec, &o);
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    CHECK_OK(rdma_connect(cid, &cp));
    struct rdma_cm_event *ev = cm_expect(ec, RDMA_CM_EVENT_ESTABLISHED, TMO);
    CHECK(ev->param.conn.private_data_len >= sizeof(struct xinfo), "private data len %u", ev->param.conn.private_data_len);
    struct xinfo xi;
    memcpy(&xi, ev->param.conn.private_data, sizeof xi);
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_EQ(xi.len, REGION);
    uint8_t *buf = xalloc(1 << 20);
    struct ibv_mr *mr = reg(e.pd, buf, 1 << 20, LW);
    post_recv(e.qp, 100, buf + 900000, 4096, mr->lkey);
    fill_pattern(buf, 1000, 1);
    post_send(e.qp, 1, IBV_WR_SEND, buf, 1000, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    fill_pattern(buf + 4096, 65536, 2);
    post_send(e.qp, 2, IBV_WR_RDMA_WRITE_WITH_IMM, buf + 4096, 65536, mr->lkey, IBV_SEND_SIGNALED, htonl(0xC0FFEE01),
              xi.addr + REGION / 2, xi.rkey);
    post_send(e.qp, 3, IBV_WR_RDMA_READ, buf + 131072, 262144, mr->lkey, IBV_SEND_SIGNALED, 0, xi.addr, xi.rkey);
    struct ibv_wc wc = wait_wc(e.scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_SEND, e.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(e.scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_RDMA_WRITE, e.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(e.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_RDMA_READ, e.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(check_pattern(buf + 131072, 262144, 7), "READ data from the other process");
    wc = wait_wc(e.rcq, TMO);
    check_wc_ok(&wc, 100, IBV_WC_RECV, e.qp->qp_num, 4, 0, 0);
    uint32_t m;
    memcpy(&m, buf + 900000, 4);
    CHECK_EQ(m, MAGIC);
    CHECK_OK(rdma_disconnect(cid));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(cid));
    rdma_destroy_event_channel(ec);
}

TEST(xproc_exchange, 60) {
    int rfd;
    pid_t pid = spawn_server(test_addr(), NULL, 0, &rfd);
    xclient(test_addr(), rfd);
    wait_child_ok(pid, 20000);
    close(rfd);
}

/* the server process is SIGKILLed while connected, with a SEND (RNR-retrying forever) and receives
 * outstanding: the survivor must see DISCONNECTED and/or error completions within 30 s, and all its
 * WRs complete (in error) after rdma_disconnect. Never a hang. */
TEST(xproc_peer_killed, 90) {
    int rfd;
    pid_t pid = spawn_server(test_addr(), NULL, 1, &rfd);
    uint16_t port;
    read_all(rfd, &port, sizeof port, TMO);
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *cid = cm_resolve(ec, test_addr(), port);
    struct qp_opts o;
    qp_opts_default(&o);
    struct ep e;
    memset(&e, 0, sizeof e);
    cm_ep_setup(&e, cid, ec, &o);
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    CHECK_OK(rdma_connect(cid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    uint8_t *buf = xalloc(65536);
    struct ibv_mr *mr = reg(e.pd, buf, 65536, LW);
    post_send(e.qp, 1, IBV_WR_SEND, buf, 16, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(e.scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_SEND, e.qp->qp_num, WC_ANY_LEN, 0, 0);
    char c;
    read_all(rfd, &c, 1, TMO);
    for (int i = 0; i < 4; i++) post_recv(e.qp, 10 + i, buf + 4096 * (i + 1), 4096, mr->lkey);
    post_send(e.qp, 2, IBV_WR_SEND, buf, 100, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0); /* RNR: no receive there */
    msleep(100);
    CHECK_OK(kill(pid, SIGKILL));
    int st;
    CHECK(waitpid(pid, &st, 0) == pid, "waitpid");
    double t0 = now_ms();
    int disconnected = 0, outstanding = 5, errors = 0;
    /* phase 1: notice the peer's death */
    while (!disconnected && errors == 0) {
        if (now_ms() - t0 > 30000) FAIL("no DISCONNECTED event and no error completion within 30 s of the peer's death");
        struct rdma_cm_event *ev = cm_next(ec, 10);
        if (ev) {
            CHECK(ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT,
                  "unexpected cm event %s", rdma_event_str(ev->event));
            if (ev->event == RDMA_CM_EVENT_DISCONNECTED) disconnected = 1;
            CHECK_OK(rdma_ack_cm_event(ev));
        }
        struct ibv_wc w;
        struct ibv_cq *cqs[2] = {e.scq, e.rcq};
        for (int k = 0; k < 2; k++)
            while (ibv_poll_cq(cqs[k], 1, &w) == 1) {
                CHECK(w.status != IBV_WC_SUCCESS, "wr_id %llu completed successfully after the peer died",
                      (unsigned long long)w.wr_id);
                errors++;
                outstanding--;
            }
    }
    LOG("peer death noticed after %.0f ms (disconnected=%d, error completions=%d)", now_ms() - t0, disconnected, errors);
    /* phase 2: everything completes */
    rdma_disconnect(cid);
    double t1 = now_ms();
    while (outstanding > 0) {
        if (now_ms() - t1 > 30000) FAIL("%d WRs never completed after rdma_disconnect", outstanding);
        struct ibv_wc w;
        struct ibv_cq *cqs[2] = {e.scq, e.rcq};
        for (int k = 0; k < 2; k++)
            while (ibv_poll_cq(cqs[k], 1, &w) == 1) {
                CHECK(w.status != IBV_WC_SUCCESS, "wr_id %llu succeeded", (unsigned long long)w.wr_id);
                CHECK(w.qp_num == e.qp->qp_num, "qp_num");
                outstanding--;
            }
        struct rdma_cm_event *ev = cm_next(ec, 5);
        if (ev) CHECK_OK(rdma_ack_cm_event(ev));
    }
    CHECK_EQ(qp_state(e.qp), IBV_QPS_ERR);
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(cid));
    rdma_destroy_event_channel(ec);
    close(rfd);
}

/* 9. server in netns sr_a (198.18.0.1), client in sr_b (198.18.0.2), joined by a veth pair */
static void netns_cleanup(void) {
    int r = system("ip netns del sr_a >/dev/null 2>&1; ip netns del sr_b >/dev/null 2>&1; "
                   "ip link del sr_va >/dev/null 2>&1; true");
    (void)r;
}

static void sh(const char *cmd) {
    int r = system(cmd);
    if (r != 0) FAIL("'%s' failed (%d)", cmd, r);
}

SR_TEST_FULL(netns_two_hosts, "netns_two_hosts", 90, netns_cleanup) {
    if (geteuid() != 0) SKIP("not root: cannot create network namespaces");
    const char *e = getenv("SOFTRDMA_TEST_NETNS");
    if (e && !strcmp(e, "0")) SKIP("SOFTRDMA_TEST_NETNS=0");
    netns_cleanup();
    if (system("ip netns add sr_a >/dev/null 2>&1") != 0) SKIP("'ip netns add' does not work here");
    sh("ip netns add sr_b");
    sh("ip link add sr_va type veth peer name sr_vb");
    sh("ip link set sr_va netns sr_a && ip link set sr_vb netns sr_b");
    sh("ip -n sr_a addr add 198.18.0.1/24 dev sr_va && ip -n sr_b addr add 198.18.0.2/24 dev sr_vb");
    sh("ip -n sr_a link set lo up && ip -n sr_a link set sr_va up && ip -n sr_b link set lo up && ip -n sr_b link set sr_vb up");
    int rfd;
    pid_t pid = spawn_server("198.18.0.1", "sr_a", 0, &rfd);
    int fd = open("/run/netns/sr_b", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || setns(fd, CLONE_NEWNET)) FAIL("setns sr_b: %s", strerror(errno));
    close(fd);
    xclient("198.18.0.1", rfd);
    wait_child_ok(pid, 20000);
    close(rfd);
}

/* plain verbs across processes (QPN/PSN/GID exchanged over pipes, like ibv_rc_pingpong): the sender
 * exits as soon as its SENDs have completed. A successful SEND completion means the responder has the
 * data: all messages must be delivered at the survivor, in order, before anything is flushed. */
struct vinfo {
    uint32_t qpn, psn;
    union ibv_gid gid;
};

static void vqp(struct dev *d, struct ibv_pd **pd, struct ibv_cq **cq, struct ibv_qp **qp) {
    *pd = CHECK_PTR(ibv_alloc_pd(d->ctx));
    *cq = CHECK_PTR(ibv_create_cq(d->ctx, 512, NULL, NULL, 0));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = *cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 256;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    *qp = CHECK_PTR(ibv_create_qp(*pd, &ia));
    qp_to_init(*qp, d->port);
}

TEST(xproc_verbs_sender_exits, 60) {
    int up[2], down[2];
    CHECK_OK(pipe(up));
    CHECK_OK(pipe(down));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    const int N = 200;
    if (pid == 0) {
        sr_current = "sender";
        struct dev d;
        dev_open(&d);
        struct ibv_pd *pd;
        struct ibv_cq *cq;
        struct ibv_qp *qp;
        vqp(&d, &pd, &cq, &qp);
        struct vinfo me = {qp->qp_num, 0x1111, d.gid}, peer;
        write_all(up[1], &me, sizeof me);
        read_all(down[0], &peer, sizeof peer, TMO);
        qp_to_rtr(qp, &d, peer.qpn, peer.psn, 12);
        qp_to_rts(qp, &d, me.psn, 14, 7, 7);
        uint8_t *buf = xalloc(N * 512);
        struct ibv_mr *mr = reg(pd, buf, N * 512, LW);
        for (int i = 0; i < N; i++) {
            fill_pattern(buf + i * 512, 100 + i, 900 + i);
            post_send(qp, i, IBV_WR_SEND, buf + i * 512, 100 + i, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
        }
        for (int i = 0; i < N; i++) {
            struct ibv_wc wc = wait_wc(cq, TMO);
            check_wc_ok(&wc, i, IBV_WC_SEND, qp->qp_num, WC_ANY_LEN, 0, 0);
        }
        _exit(0); /* no cleanup: like a program returning from main right after its last completion */
    }
    struct dev d;
    dev_open(&d);
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    vqp(&d, &pd, &cq, &qp);
    uint8_t *buf = xalloc((N + 4) * 512);
    struct ibv_mr *mr = reg(pd, buf, (N + 4) * 512, LW);
    for (int i = 0; i < N + 4; i++) post_recv(qp, i, buf + i * 512, 512, mr->lkey);
    struct vinfo me = {qp->qp_num, 0x2222, d.gid}, peer;
    read_all(up[0], &peer, sizeof peer, TMO);
    qp_to_rtr(qp, &d, peer.qpn, peer.psn, 12);
    qp_to_rts(qp, &d, me.psn, 14, 7, 7);
    write_all(down[1], &me, sizeof me);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "sender failed (status 0x%x)", st);
    for (int i = 0; i < N; i++) {
        struct ibv_wc wc = wait_wc(cq, TMO);
        if (wc.status != IBV_WC_SUCCESS)
            FAIL("message %d (acknowledged to the sender, which then exited) completed %s at the receiver", i,
                 ibv_wc_status_str(wc.status));
        check_wc_ok(&wc, i, IBV_WC_RECV, qp->qp_num, 100 + i, 0, 0);
        CHECK(check_pattern(buf + i * 512, 100 + i, 900 + i), "message %d data", i);
    }
    CHECK_OK(ibv_destroy_qp(qp));
    CHECK_OK(ibv_destroy_cq(cq));
    dereg_pd(pd);
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
}

/* the receiver exits as soon as it has polled all its receives: every SEND it received must complete
 * successfully at the sender (the ACK precedes the receive completion; ibv_rc_pingpong relies on it) */
TEST(xproc_verbs_receiver_exits, 60) {
    int up[2], down[2];
    CHECK_OK(pipe(up));
    CHECK_OK(pipe(down));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    const int N = 200;
    if (pid == 0) {
        sr_current = "receiver";
        struct dev d;
        dev_open(&d);
        struct ibv_pd *pd;
        struct ibv_cq *cq;
        struct ibv_qp *qp;
        vqp(&d, &pd, &cq, &qp);
        uint8_t *buf = xalloc((N + 4) * 512);
        struct ibv_mr *mr = reg(pd, buf, (N + 4) * 512, LW);
        for (int i = 0; i < N + 4; i++) post_recv(qp, i, buf + i * 512, 512, mr->lkey);
        struct vinfo me = {qp->qp_num, 0x3333, d.gid}, peer;
        write_all(up[1], &me, sizeof me);
        read_all(down[0], &peer, sizeof peer, TMO);
        qp_to_rtr(qp, &d, peer.qpn, peer.psn, 12);
        qp_to_rts(qp, &d, me.psn, 14, 7, 7);
        char go = 'g';
        write_all(up[1], &go, 1);
        for (int i = 0; i < N; i++) {
            struct ibv_wc wc = wait_wc(cq, TMO);
            check_wc_ok(&wc, i, IBV_WC_RECV, qp->qp_num, 100 + i, 0, 0);
        }
        _exit(0);
    }
    struct dev d;
    dev_open(&d);
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    vqp(&d, &pd, &cq, &qp);
    struct vinfo me = {qp->qp_num, 0x4444, d.gid}, peer;
    read_all(up[0], &peer, sizeof peer, TMO);
    qp_to_rtr(qp, &d, peer.qpn, peer.psn, 12);
    qp_to_rts(qp, &d, me.psn, 14, 7, 7);
    write_all(down[1], &me, sizeof me);
    char go;
    read_all(up[0], &go, 1, TMO);
    uint8_t *buf = xalloc(N * 512);
    struct ibv_mr *mr = reg(pd, buf, N * 512, LW);
    for (int i = 0; i < N; i++) post_send(qp, i, IBV_WR_SEND, buf + i * 512, 100 + i, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    for (int i = 0; i < N; i++) {
        struct ibv_wc wc = wait_wc(cq, 30000);
        if (wc.status != IBV_WC_SUCCESS)
            FAIL("SEND %d completed %s after the receiver (which received it) exited", i, ibv_wc_status_str(wc.status));
        check_wc_ok(&wc, i, IBV_WC_SEND, qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "receiver failed (status 0x%x)", st);
    CHECK_OK(ibv_destroy_qp(qp));
    CHECK_OK(ibv_destroy_cq(cq));
    dereg_pd(pd);
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
}

/*
 * Both processes read 16 MiB from each other at once, in 8 MiB READs: every READ response is larger than
 * the same-host wire's ring (2 MiB) and is written by the responder's input path, which never blocks, while
 * that same path waits for the rest of the peer's response on the other ring. Neither side may wait for
 * the other forever (each flushes its own queued output while it waits for input).
 */
struct rinfo {
    struct vinfo v;
    uint64_t addr;
    uint32_t rkey, pad;
};

#define XREAD (16u << 20)

static void reads_both_ways(struct dev *d, int in, int out, uint32_t my_seed, uint32_t peer_seed) {
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    vqp(d, &pd, &cq, &qp);
    uint8_t *src = xalloc(XREAD), *dst = xalloc(XREAD);
    fill_pattern(src, XREAD, my_seed);
    struct ibv_mr *smr = reg(pd, src, XREAD, LW | IBV_ACCESS_REMOTE_READ), *dmr = reg(pd, dst, XREAD, LW);
    struct rinfo me = {{qp->qp_num, my_seed, d->gid}, (uintptr_t)src, smr->rkey, 0}, peer;
    write_all(out, &me, sizeof me);
    read_all(in, &peer, sizeof peer, TMO);
    qp_to_rtr(qp, d, peer.v.qpn, peer.v.psn, 12);
    qp_to_rts(qp, d, me.v.psn, 14, 7, 7);
    char c = 'r';
    write_all(out, &c, 1); /* both QPs are in RTS before either side reads */
    read_all(in, &c, 1, TMO);
    for (int i = 0; i < 2; i++)
        post_send(qp, i, IBV_WR_RDMA_READ, dst + (size_t)i * (XREAD / 2), XREAD / 2, dmr->lkey, IBV_SEND_SIGNALED,
                  0, peer.addr + (size_t)i * (XREAD / 2), peer.rkey);
    for (int i = 0; i < 2; i++) {
        struct ibv_wc wc = wait_wc(cq, 20000);
        check_wc_ok(&wc, i, IBV_WC_RDMA_READ, qp->qp_num, XREAD / 2, 0, 0);
    }
    CHECK(check_pattern(dst, XREAD, peer_seed), "data read from the peer");
    /* the peer may still be reading from us: stay until it is done */
    write_all(out, &c, 1);
    read_all(in, &c, 1, 30000);
    CHECK_OK(ibv_destroy_qp(qp));
    CHECK_OK(ibv_destroy_cq(cq));
    dereg_pd(pd);
    CHECK_OK(ibv_dealloc_pd(pd));
}

TEST(xproc_reads_both_ways, 90) {
    int up[2], down[2];
    CHECK_OK(pipe(up));
    CHECK_OK(pipe(down));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        sr_current = "peer";
        struct dev d;
        dev_open(&d);
        reads_both_ways(&d, down[0], up[1], 77, 55);
        dev_close(&d);
        _exit(0);
    }
    struct dev d;
    dev_open(&d);
    reads_both_ways(&d, up[0], down[1], 55, 77);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer failed (status 0x%x)", st);
    dev_close(&d);
    close(up[0]);
    close(up[1]);
    close(down[0]);
    close(down[1]);
}
