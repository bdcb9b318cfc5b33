/* Further behaviour the transport relies on: threads, epoll, two contexts, MR variants, rd_atomic
 * throttling, dereg'd / foreign-PD keys, async fd, destroy of a connected cm id, client killed. */
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE
#define ALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

/* 4 QP pairs, 8 threads: each thread owns one endpoint, sends N messages to its peer and receives N,
 * both directions at once, posting and polling concurrently with the other threads. */
struct tctx {
    struct ep *me;
    uint8_t *buf;
    struct ibv_mr *mr;
    int n;
    char err[256];
};

#define TW 16
static void *tbody(void *arg) {
    struct tctx *t = arg;
    struct ep *e = t->me;
    int sent = 0, sdone = 0, recvd = 0, posted_r = 0, idle = 0;
    uint8_t *sb = t->buf, *rb = t->buf + 65536;
    for (; posted_r < 64; posted_r++) {
        struct ibv_sge s = sge(rb + (posted_r % 64) * 256, 256, t->mr->lkey);
        struct ibv_recv_wr w = {.wr_id = posted_r, .sg_list = &s, .num_sge = 1}, *bad;
        if (ibv_post_recv(e->qp, &w, &bad)) { snprintf(t->err, sizeof t->err, "post_recv"); return NULL; }
    }
    double end = now_ms() + 60000;
    while (recvd < t->n || sdone < t->n) {
        if (now_ms() > end) { snprintf(t->err, sizeof t->err, "timeout: sent %d/%d recvd %d", sdone, t->n, recvd); return NULL; }
        while (sent < t->n && sent - sdone < TW) {
            uint32_t v[4] = {sent, ~sent, e->qp->qp_num, 0x5a5a5a5a};
            memcpy(sb + (sent % TW) * 64, v, 16);
            struct ibv_sge s = sge(sb + (sent % TW) * 64, 16, t->mr->lkey);
            struct ibv_send_wr w = {.wr_id = sent, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
            int rc = ibv_post_send(e->qp, &w, &bad);
            if (rc) { snprintf(t->err, sizeof t->err, "post_send %d", rc); return NULL; }
            sent++;
        }
        struct ibv_wc wc[8];
        int n = ibv_poll_cq(e->scq, 8, wc);
        for (int i = 0; i < n; i++) {
            if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != (uint64_t)sdone || wc[i].opcode != IBV_WC_SEND) {
                snprintf(t->err, sizeof t->err, "send wc %d: wr_id %llu status %s", sdone, (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status));
                return NULL;
            }
            sdone++;
        }
        n = ibv_poll_cq(e->rcq, 8, wc);
        for (int i = 0; i < n; i++) {
            uint32_t v[4];
            memcpy(v, rb + (recvd % 64) * 256, 16);
            if (wc[i].status != IBV_WC_SUCCESS || wc[i].wr_id != (uint64_t)recvd || wc[i].byte_len != 16 ||
                v[0] != (uint32_t)recvd || v[1] != ~(uint32_t)recvd || v[3] != 0x5a5a5a5a) {
                snprintf(t->err, sizeof t->err, "recv %d: wr_id %llu status %s len %u data %u", recvd,
                         (unsigned long long)wc[i].wr_id, ibv_wc_status_str(wc[i].status), wc[i].byte_len, v[0]);
                return NULL;
            }
            recvd++;
            struct ibv_sge s = sge(rb + (posted_r % 64) * 256, 256, t->mr->lkey);
            struct ibv_recv_wr w = {.wr_id = posted_r, .sg_list = &s, .num_sge = 1}, *bad;
            if (ibv_post_recv(e->qp, &w, &bad)) { snprintf(t->err, sizeof t->err, "repost"); return NULL; }
            posted_r++;
        }
        /* back off when idle, as the transport's event loops do (they share 2 cores with the device) */
        if (n == 0 && ++idle > 64) {
            if (idle < 256) sched_yield();
            else usleep(50);
        } else if (n) idle = 0;
    }
    return NULL;
}

static void threads_test(int kind) {
    int NP = getenv("SR_THREAD_PAIRS") ? atoi(getenv("SR_THREAD_PAIRS")) : 4;
    if (NP < 1 || NP > 4) NP = 4;
    struct pair p[4];
    struct tctx t[8];
    pthread_t th[8];
    for (int i = 0; i < NP; i++) {
        pair_open(&p[i], kind, NULL);
        for (int s = 0; s < 2; s++) {
            struct tctx *c = &t[2 * i + s];
            memset(c, 0, sizeof *c);
            c->me = s ? &p[i].b : &p[i].a;
            c->buf = xalloc(65536 + 64 * 256);
            c->mr = reg(c->me->pd, c->buf, 65536 + 64 * 256, LW);
            c->n = 5000;
        }
    }
    for (int i = 0; i < 2 * NP; i++) CHECK_OK(pthread_create(&th[i], NULL, tbody, &t[i]));
    for (int i = 0; i < 2 * NP; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2 * NP; i++) CHECK(!t[i].err[0], "thread %d: %s", i, t[i].err);
    for (int i = 0; i < NP; i++) pair_close(&p[i]);
}

TEST_BOTH(threads_bidirectional, 120) { threads_test(kind); }

/* epoll over a completion channel fd, an rdma_cm event channel fd and an eventfd (the event loop's set) */
TEST(epoll_channels, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.with_channel = 1;
    struct pair p;
    pair_open(&p, CONN_CM, &o);
    int ep = epoll_create1(EPOLL_CLOEXEC), efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    CHECK(ep >= 0 && efd >= 0, "epoll/eventfd");
    struct epoll_event ev = {.events = EPOLLIN};
    ev.data.u32 = 1;
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, p.b.ch->fd, &ev));
    ev.data.u32 = 2;
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, p.lec->fd, &ev));
    ev.data.u32 = 3;
    CHECK_OK(epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev));
    struct epoll_event out[4];
    CHECK_EQ(epoll_wait(ep, out, 4, 50), 0);
    uint8_t *a = xalloc(4096), *b = xalloc(4096);
    struct ibv_mr *amr = reg(p.a.pd, a, 4096, LW), *bmr = reg(p.b.pd, b, 4096, LW);
    CHECK_OK(ibv_req_notify_cq(p.b.rcq, 0));
    post_recv(p.b.qp, 1, b, 64, bmr->lkey);
    post_send(p.a.qp, 2, IBV_WR_SEND, a, 8, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    int n = epoll_wait(ep, out, 4, TMO);
    CHECK(n == 1 && out[0].data.u32 == 1, "epoll: n=%d first=%u (expected the completion channel)", n, n > 0 ? out[0].data.u32 : 0);
    struct ibv_cq *cq;
    void *ctx;
    CHECK_OK(ibv_get_cq_event(p.b.ch, &cq, &ctx));
    ibv_ack_cq_events(cq, 1);
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.b.qp->qp_num, 8, 0, 0);
    wc = wait_wc(p.a.scq, TMO);
    uint64_t one = 1;
    CHECK(write(efd, &one, 8) == 8, "eventfd write");
    n = epoll_wait(ep, out, 4, TMO);
    CHECK(n == 1 && out[0].data.u32 == 3, "epoll: n=%d (expected the eventfd)", n);
    CHECK(read(efd, &one, 8) == 8, "eventfd read");
    /* a cm event: the client disconnects -> DISCONNECTED on the server's channel */
    CHECK_OK(rdma_disconnect(p.a.id));
    n = epoll_wait(ep, out, 4, TMO);
    CHECK(n == 1 && out[0].data.u32 == 2, "epoll: n=%d (expected the cm channel)", n);
    CHECK_OK(rdma_ack_cm_event(cm_expect(p.lec, RDMA_CM_EVENT_DISCONNECTED, 0)));
    rdma_disconnect(p.b.id);
    CHECK_OK(rdma_ack_cm_event(cm_expect(p.cec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    close(ep);
    close(efd);
    ep_destroy(&p.a);
    ep_destroy(&p.b);
    CHECK_OK(rdma_destroy_id(p.a.id));
    CHECK_OK(rdma_destroy_id(p.b.id));
    CHECK_OK(rdma_destroy_id(p.listen));
    rdma_destroy_event_channel(p.cec);
    rdma_destroy_event_channel(p.lec);
}

/* QPs of two different device contexts (same device opened twice) talk to each other */
TEST(two_contexts, 30) {
    struct dev d1, d2;
    dev_open(&d1);
    dev_open(&d2);
    CHECK(d1.ctx != d2.ctx, "distinct contexts");
    struct ibv_dev_ep {
        struct ibv_pd *pd;
        struct ibv_cq *cq;
        struct ibv_qp *qp;
    } e[2];
    struct dev *ds[2] = {&d1, &d2};
    for (int i = 0; i < 2; i++) {
        e[i].pd = CHECK_PTR(ibv_alloc_pd(ds[i]->ctx));
        e[i].cq = CHECK_PTR(ibv_create_cq(ds[i]->ctx, 16, NULL, NULL, 0));
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        ia.send_cq = ia.recv_cq = e[i].cq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        e[i].qp = CHECK_PTR(ibv_create_qp(e[i].pd, &ia));
    }
    for (int i = 0; i < 2; i++) {
        qp_to_init(e[i].qp, ds[i]->port);
        qp_to_rtr(e[i].qp, ds[i], e[!i].qp->qp_num, 0, 1);
        qp_to_rts(e[i].qp, ds[i], 0, 14, 7, 7);
    }
    uint8_t *a = xalloc(4096), *b = xalloc(4096);
    struct ibv_mr *amr = reg(e[0].pd, a, 4096, ALL), *bmr = reg(e[1].pd, b, 4096, ALL);
    fill_pattern(a, 1000, 8);
    post_recv(e[1].qp, 1, b, 4096, bmr->lkey);
    post_send(e[0].qp, 2, IBV_WR_SEND, a, 1000, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(e[1].cq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, e[1].qp->qp_num, 1000, 0, 0);
    CHECK(check_pattern(b, 1000, 8), "data");
    wc = wait_wc(e[0].cq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_SEND, e[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    post_send(e[1].qp, 3, IBV_WR_RDMA_READ, b + 2048, 1000, bmr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)a, amr->rkey);
    wc = wait_wc(e[1].cq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_RDMA_READ, e[1].qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(check_pattern(b + 2048, 1000, 8), "read data");
    for (int i = 0; i < 2; i++) {
        CHECK_OK(ibv_destroy_qp(e[i].qp));
        CHECK_OK(ibv_destroy_cq(e[i].cq));
        dereg_pd(e[i].pd);
        CHECK_OK(ibv_dealloc_pd(e[i].pd));
    }
    dev_close(&d1);
    dev_close(&d2);
}

/* ibv_reg_mr with an optional access flag (relaxed ordering: must be ignored when unsupported),
 * and ibv_reg_mr_iova2 with an iova different from the address: remote access uses the iova. */
TEST_BOTH(mr_iova_and_optional_flags, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    uint8_t *a = xalloc(65536), *b = xalloc(65536);
    struct ibv_mr *amr = ibv_reg_mr(p.a.pd, a, 65536, LW | IBV_ACCESS_RELAXED_ORDERING);
    CHECK(amr != NULL, "ibv_reg_mr with IBV_ACCESS_RELAXED_ORDERING: %s", strerror(errno));
    uint64_t iova = 0x100000000ull; /* not the address */
    struct ibv_mr *bmr = ibv_reg_mr_iova2(p.b.pd, b, 65536, iova, ALL);
    CHECK(bmr != NULL, "ibv_reg_mr_iova2: %s", strerror(errno));
    fill_pattern(a, 5000, 12);
    post_send(p.a.qp, 1, IBV_WR_RDMA_WRITE, a, 5000, amr->lkey, IBV_SEND_SIGNALED, 0, iova + 100, bmr->rkey);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(check_pattern(b + 100, 5000, 12), "WRITE to iova+100 did not land at addr+100");
    post_send(p.a.qp, 2, IBV_WR_RDMA_READ, a + 10000, 5000, amr->lkey, IBV_SEND_SIGNALED, 0, iova + 100, bmr->rkey);
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_RDMA_READ, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(check_pattern(a + 10000, 5000, 12), "READ via iova");
    /* the virtual address is not a valid remote address for an iova-registered MR (unless it happens to fall in range) */
    if ((uintptr_t)b + 65536 <= iova || (uintptr_t)b >= iova + 65536) {
        post_send(p.a.qp, 3, IBV_WR_RDMA_WRITE, a, 8, amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)b, bmr->rkey);
        wc = wait_wc(p.a.scq, TMO);
        check_wc_err(&wc, 3, IBV_WC_REM_ACCESS_ERR, p.a.qp->qp_num);
    }
    CHECK_OK(ibv_dereg_mr(amr));
    CHECK_OK(ibv_dereg_mr(bmr));
    pair_close(&p);
}

/* max_rd_atomic 1: many outstanding READs are throttled by the requester, never refused */
TEST(rd_atomic_throttle, 30) {
    struct pair p;
    memset(&p, 0, sizeof p);
    p.kind = CONN_VERBS;
    qp_opts_default(&p.o);
    dev_open(&p.dev);
    struct dev one = p.dev;
    one.attr.max_qp_rd_atom = one.attr.max_qp_init_rd_atom = 1;
    struct ep *es[2] = {&p.a, &p.b};
    for (int i = 0; i < 2; i++) {
        struct ep *e = es[i];
        e->ctx = p.dev.ctx;
        e->pd = CHECK_PTR(ibv_alloc_pd(e->ctx));
        e->scq = CHECK_PTR(ibv_create_cq(e->ctx, 256, NULL, NULL, 0));
        e->rcq = CHECK_PTR(ibv_create_cq(e->ctx, 256, NULL, NULL, 0));
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        ia.send_cq = e->scq;
        ia.recv_cq = e->rcq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = 64;
        ia.cap.max_recv_wr = 8;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        e->qp = CHECK_PTR(ibv_create_qp(e->pd, &ia));
    }
    for (int i = 0; i < 2; i++) {
        qp_to_init(es[i]->qp, one.port);
        qp_to_rtr(es[i]->qp, &one, es[!i]->qp->qp_num, 0, 1);
        qp_to_rts(es[i]->qp, &one, 0, 14, 7, 7);
    }
    uint8_t *a = xalloc(1 << 20), *b = xalloc(1 << 20);
    struct ibv_mr *amr = reg(p.a.pd, a, 1 << 20, ALL), *bmr = reg(p.b.pd, b, 1 << 20, ALL);
    fill_pattern(b, 1 << 20, 77);
    for (int i = 0; i < 48; i++)
        post_send(p.a.qp, i, IBV_WR_RDMA_READ, a + i * 16384, 16384, amr->lkey, IBV_SEND_SIGNALED, 0,
                  (uintptr_t)(b + i * 16384), bmr->rkey);
    for (int i = 0; i < 48; i++) {
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, i, IBV_WC_RDMA_READ, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    CHECK(!memcmp(a, b, 48 * 16384), "read data");
    pair_close(&p);
}

/* an rkey stays invalid after ibv_dereg_mr; an rkey of an MR in another PD than the responder QP's is refused */
TEST_BOTH(err_rkey_deregistered_or_foreign_pd, 30) {
    for (int v = 0; v < 2; v++) {
        struct pair p;
        pair_open(&p, kind, NULL);
        uint8_t *a = xalloc(8192), *b = xalloc(8192);
        struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW);
        struct ibv_pd *other = NULL;
        uint32_t rkey;
        memset(b, 0x11, 8192);
        if (v == 0) {
            struct ibv_mr *bmr = reg(p.b.pd, b, 8192, ALL);
            rkey = bmr->rkey;
            post_send(p.a.qp, 1, IBV_WR_RDMA_WRITE, a, 8, amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)b, rkey);
            struct ibv_wc wc = wait_wc(p.a.scq, TMO);
            check_wc_ok(&wc, 1, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
            memset(b, 0x11, 8192);
            dereg(bmr);
        } else {
            other = CHECK_PTR(ibv_alloc_pd(p.b.ctx));
            rkey = reg(other, b, 8192, ALL)->rkey;
        }
        post_send(p.a.qp, 2, IBV_WR_RDMA_WRITE, a, 64, amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)b, rkey);
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_err(&wc, 2, IBV_WC_REM_ACCESS_ERR, p.a.qp->qp_num);
        for (int i = 0; i < 8192; i++) CHECK(b[i] == 0x11, "memory written through a %s rkey", v ? "foreign-PD" : "deregistered");
        if (other) {
            dereg_pd(other);
            CHECK_OK(ibv_dealloc_pd(other));
        }
        pair_close(&p);
    }
}

/* the async event fd: non-blocking read gives EAGAIN when nothing happened */
TEST(async_fd, 20) {
    struct dev d;
    dev_open(&d);
    int fl = fcntl(d.ctx->async_fd, F_GETFL);
    CHECK(fl >= 0 && fcntl(d.ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl");
    struct ibv_async_event ev;
    errno = 0;
    CHECK_EQ(ibv_get_async_event(d.ctx, &ev), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK(!fd_readable(d.ctx->async_fd, 20), "async fd readable");
    dev_close(&d);
}

/* rdma_destroy_id on a connected id (no rdma_disconnect): the peer gets DISCONNECTED */
TEST(cm_destroy_connected_id, 30) {
    struct pair p;
    pair_open(&p, CONN_CM, NULL);
    ep_destroy(&p.a);
    CHECK_OK(rdma_destroy_id(p.a.id));
    CHECK_OK(rdma_ack_cm_event(cm_expect(p.lec, RDMA_CM_EVENT_DISCONNECTED, 10000)));
    rdma_disconnect(p.b.id);
    ep_destroy(&p.b);
    CHECK_OK(rdma_destroy_id(p.b.id));
    CHECK_OK(rdma_destroy_id(p.listen));
    rdma_destroy_event_channel(p.cec);
    rdma_destroy_event_channel(p.lec);
}

/* the client process is SIGKILLed while connected: the server survives, sees DISCONNECTED and/or
 * error completions within 30 s, its listener keeps accepting */
TEST(xproc_client_killed, 90) {
    int pfd[2], qfd[2];
    CHECK_OK(pipe(pfd));
    CHECK_OK(pipe(qfd));
    fflush(NULL);
    pid_t pid = fork(); /* before this process touches verbs / rdma_cm */
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        sr_current = "client(victim)";
        close(pfd[0]);
        close(qfd[1]);
        uint16_t port;
        struct pollfd pq = {qfd[0], POLLIN, 0};
        CHECK(poll(&pq, 1, TMO) == 1 && read(qfd[0], &port, 2) == 2, "port from parent");
        struct rdma_event_channel *ec = cm_channel();
        struct rdma_cm_id *cid = cm_resolve(ec, test_addr(), port);
        struct qp_opts o;
        qp_opts_default(&o);
        struct ep e;
        memset(&e, 0, sizeof e);
        cm_ep_setup(&e, cid, ec, &o);
        struct rdma_conn_param cp;
        memset(&cp, 0, sizeof cp);
        cp.retry_count = 7;
        cp.rnr_retry_count = 7;
        CHECK_OK(rdma_connect(cid, &cp));
        CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
        char c = 'r';
        CHECK(write(pfd[1], &c, 1) == 1, "pipe");
        for (;;) pause();
    }
    close(pfd[1]);
    close(qfd[0]);
    struct rdma_event_channel *lec = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(lec, &listen);
    CHECK(write(qfd[1], &port, 2) == 2, "pipe");
    struct rdma_cm_event *ev = cm_expect(lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    struct rdma_cm_id *sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    struct qp_opts o;
    qp_opts_default(&o);
    struct ep e;
    memset(&e, 0, sizeof e);
    cm_ep_setup(&e, sid, lec, &o);
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    CHECK_OK(rdma_accept(sid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(lec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    char c;
    struct pollfd pf = {pfd[0], POLLIN, 0};
    CHECK(poll(&pf, 1, TMO) == 1 && read(pfd[0], &c, 1) == 1, "client ready");
    uint8_t *buf = xalloc(8192);
    struct ibv_mr *mr = reg(e.pd, buf, 8192, LW);
    for (int i = 0; i < 3; i++) post_recv(e.qp, i, buf + i * 1024, 1024, mr->lkey);
    post_send(e.qp, 10, IBV_WR_SEND, buf + 4096, 8, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0); /* client has no RECV: RNR */
    CHECK_OK(kill(pid, SIGKILL));
    int st;
    waitpid(pid, &st, 0);
    double t0 = now_ms();
    int outstanding = 4, noticed = 0;
    while (!noticed) {
        if (now_ms() - t0 > 30000) FAIL("server noticed nothing within 30 s of the client's death");
        ev = cm_next(lec, 10);
        if (ev) {
            CHECK(ev->event == RDMA_CM_EVENT_DISCONNECTED || ev->event == RDMA_CM_EVENT_TIMEWAIT_EXIT, "event %s", rdma_event_str(ev->event));
            noticed |= ev->event == RDMA_CM_EVENT_DISCONNECTED;
            CHECK_OK(rdma_ack_cm_event(ev));
        }
        struct ibv_wc w;
        while (ibv_poll_cq(e.scq, 1, &w) == 1 || ibv_poll_cq(e.rcq, 1, &w) == 1) {
            CHECK(w.status != IBV_WC_SUCCESS, "wr %llu succeeded", (unsigned long long)w.wr_id);
            outstanding--;
            noticed = 1;
        }
    }
    rdma_disconnect(sid);
    double t1 = now_ms();
    while (outstanding > 0) {
        if (now_ms() - t1 > 30000) FAIL("%d WRs never completed", outstanding);
        struct ibv_wc w;
        while (ibv_poll_cq(e.scq, 1, &w) == 1 || ibv_poll_cq(e.rcq, 1, &w) == 1) {
            CHECK(w.status != IBV_WC_SUCCESS, "wr %llu succeeded", (unsigned long long)w.wr_id);
            outstanding--;
        }
        ev = cm_next(lec, 5);
        if (ev) CHECK_OK(rdma_ack_cm_event(ev));
    }
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(sid));
    /* the listener still works */
    struct rdma_event_channel *cec = cm_channel();
    struct rdma_cm_id *c2 = cm_resolve(cec, test_addr(), port);
    struct ep a2;
    memset(&a2, 0, sizeof a2);
    cm_ep_setup(&a2, c2, cec, &o);
    CHECK_OK(rdma_connect(c2, &cp));
    ev = cm_expect(lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    struct rdma_cm_id *s2 = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_reject(s2, NULL, 0));
    CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_REJECTED, TMO)));
    CHECK_OK(rdma_destroy_id(s2));
    ep_destroy(&a2);
    CHECK_OK(rdma_destroy_id(c2));
    CHECK_OK(rdma_destroy_id(listen));
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(lec);
    close(pfd[0]);
    close(qfd[1]);
}

/* CQ overrun is reported, never silent: more receive completions than the CQ holds -> async event
 * IBV_EVENT_CQ_ERR for that CQ on the context's async fd */
TEST(cq_overrun_async_event, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.cq_size = 8;
    o.max_recv_wr = 128;
    o.max_send_wr = 128;
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    int cqe = p.b.rcq->cqe;
    CHECK(cqe >= 8 && cqe < 120, "cq->cqe %d", cqe);
    uint8_t *a = xalloc(4096), *b = xalloc(4096);
    struct ibv_mr *amr = reg(p.a.pd, a, 4096, LW), *bmr = reg(p.b.pd, b, 4096, LW);
    int n = cqe + 8;
    for (int i = 0; i < n; i++) post_recv(p.b.qp, i, b, 16, bmr->lkey);
    for (int i = 0; i < n; i++) post_send(p.a.qp, i, IBV_WR_SEND, a, 8, amr->lkey, 0, 0, 0, 0);
    CHECK(fd_readable(p.dev.ctx->async_fd, 10000), "no async event within 10 s after overrunning a %d-entry CQ with %d completions", cqe, n);
    struct ibv_async_event ev;
    CHECK_OK(ibv_get_async_event(p.dev.ctx, &ev));
    LOG("async event %s", ibv_event_type_str(ev.event_type));
    CHECK(ev.event_type == IBV_EVENT_CQ_ERR, "async event %s (%d), expected IBV_EVENT_CQ_ERR", ibv_event_type_str(ev.event_type), ev.event_type);
    CHECK(ev.element.cq == p.b.rcq, "event for cq %p, expected %p", (void *)ev.element.cq, (void *)p.b.rcq);
    ibv_ack_async_event(&ev);
    /* whatever was queued is well-formed */
    struct ibv_wc wc;
    int got = 0;
    while (ibv_poll_cq(p.b.rcq, 1, &wc) == 1) {
        CHECK(wc.qp_num == p.b.qp->qp_num, "qp_num of a queued CQE");
        CHECK(got < cqe + 1, "more CQEs (%d) than the CQ holds (%d)", got + 1, cqe);
        got++;
    }
    /* drain any further async events (e.g. QP fatal) so the context can close */
    int fl = fcntl(p.dev.ctx->async_fd, F_GETFL);
    fcntl(p.dev.ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
    while (ibv_get_async_event(p.dev.ctx, &ev) == 0) {
        LOG("further async event %s", ibv_event_type_str(ev.event_type));
        ibv_ack_async_event(&ev);
    }
    pair_close(&p);
}

/* event-driven ping-pong, both sides in their own thread blocking on their completion channel with the
 * event-loop pattern (drain; arm; drain again to close the race; block in poll). A lost wakeup hangs
 * one side: reported after 5 s of silence.
 * The send CQ is reaped after every batch of receives: a receive loop that keeps finding work (the peer
 * answers before the loop polls again) left the send CQ unpolled until it overran, its CQEs were lost
 * (IBA 11.4.2.1) and the missing send completions were reported as a lost wakeup (1 run in ~40 under a
 * CPU hog with 256 CQEs; every other run with 8). */
struct pp {
    struct ep *e;
    int initiator, n;
    uint8_t *buf;
    struct ibv_mr *mr;
    char err[200];
};

static int pp_reap_sends(struct pp *s, int *sdone) {
    struct ibv_wc wc[8];
    int progress = 0, n;
    while ((n = ibv_poll_cq(s->e->scq, 8, wc)) > 0) {
        for (int i = 0; i < n; i++)
            if (wc[i].status != IBV_WC_SUCCESS) snprintf(s->err, sizeof s->err, "send wc %s", ibv_wc_status_str(wc[i].status));
        *sdone += n;
        progress = 1;
    }
    if (n < 0) snprintf(s->err, sizeof s->err, "send CQ: ibv_poll_cq %d (overrun)", n);
    return progress;
}

static int pp_drain(struct pp *s, int *received, int *sdone, int *sent) {
    struct ibv_wc wc[8];
    int progress = pp_reap_sends(s, sdone), n = 0;
    while (!s->err[0] && (n = ibv_poll_cq(s->e->rcq, 8, wc)) > 0) {
        for (int i = 0; i < n; i++) {
            uint32_t v;
            memcpy(&v, s->buf + wc[i].wr_id * 64, 4);
            if (wc[i].status != IBV_WC_SUCCESS || v != (uint32_t)*received)
                snprintf(s->err, sizeof s->err, "recv %d: %s value %u", *received, ibv_wc_status_str(wc[i].status), v);
            (*received)++;
            struct ibv_sge g = sge(s->buf + wc[i].wr_id * 64, 64, s->mr->lkey);
            struct ibv_recv_wr w = {.wr_id = wc[i].wr_id, .sg_list = &g, .num_sge = 1}, *bad;
            if (ibv_post_recv(s->e->qp, &w, &bad)) snprintf(s->err, sizeof s->err, "repost");
            /* reply (responder) or next ping (initiator) */
            if (*sent < s->n && (!s->initiator || *received < s->n)) {
                uint32_t nv = s->initiator ? (uint32_t)*received : (uint32_t)(*received - 1);
                memcpy(s->buf + 4096 + (*sent % 16) * 64, &nv, 4);
                struct ibv_sge sg = sge(s->buf + 4096 + (*sent % 16) * 64, 4, s->mr->lkey);
                struct ibv_send_wr sw = {.wr_id = *sent, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND,
                                         .send_flags = IBV_SEND_SIGNALED}, *sbad;
                if (ibv_post_send(s->e->qp, &sw, &sbad)) snprintf(s->err, sizeof s->err, "post_send");
                (*sent)++;
            }
        }
        pp_reap_sends(s, sdone);
        progress = 1;
    }
    if (n < 0) snprintf(s->err, sizeof s->err, "receive CQ: ibv_poll_cq %d (overrun)", n);
    return progress;
}

static void *pp_body(void *arg) {
    struct pp *s = arg;
    for (int i = 0; i < 16; i++) {
        struct ibv_sge g = sge(s->buf + i * 64, 64, s->mr->lkey);
        struct ibv_recv_wr w = {.wr_id = i, .sg_list = &g, .num_sge = 1}, *bad;
        if (ibv_post_recv(s->e->qp, &w, &bad)) { snprintf(s->err, sizeof s->err, "post_recv"); return NULL; }
    }
    return s;
}

static void *pp_run(void *arg) {
    struct pp *s = arg;
    int received = 0, sdone = 0, sent = 0;
    if (s->initiator) {
        uint32_t v = 0;
        memcpy(s->buf + 4096, &v, 4);
        struct ibv_sge sg = sge(s->buf + 4096, 4, s->mr->lkey);
        struct ibv_send_wr sw = {.wr_id = 0, .sg_list = &sg, .num_sge = 1, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *sbad;
        if (ibv_post_send(s->e->qp, &sw, &sbad)) { snprintf(s->err, sizeof s->err, "first send"); return NULL; }
        sent = 1;
    }
    while (!s->err[0] && (received < s->n || sdone < sent)) {
        if (pp_drain(s, &received, &sdone, &sent)) continue;
        if (ibv_req_notify_cq(s->e->scq, 0) || ibv_req_notify_cq(s->e->rcq, 0)) { snprintf(s->err, sizeof s->err, "arm"); break; }
        if (pp_drain(s, &received, &sdone, &sent)) continue; /* closes the arm/poll race */
        if (!fd_readable(s->e->ch->fd, 5000)) {
            snprintf(s->err, sizeof s->err, "%s: no completion event for 5 s (received %d/%d, sends %d/%d): lost wakeup",
                     s->initiator ? "initiator" : "responder", received, s->n, sdone, sent);
            break;
        }
        struct ibv_cq *cq;
        void *ctx;
        if (ibv_get_cq_event(s->e->ch, &cq, &ctx)) { snprintf(s->err, sizeof s->err, "get_cq_event"); break; }
        ibv_ack_cq_events(cq, 1);
    }
    return NULL;
}

static void pingpong_on_events(int kind, int cq_size) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.with_channel = 1;
    o.cq_size = cq_size;
    struct pair p;
    pair_open(&p, kind, &o);
    struct pp s[2];
    memset(s, 0, sizeof s);
    for (int i = 0; i < 2; i++) {
        s[i].e = i ? &p.b : &p.a;
        s[i].initiator = !i;
        s[i].n = 3000;
        s[i].buf = xalloc(8192);
        s[i].mr = reg(s[i].e->pd, s[i].buf, 8192, LW);
        pp_body(&s[i]);
        CHECK(!s[i].err[0], "%s", s[i].err);
    }
    pthread_t th[2];
    for (int i = 0; i < 2; i++) CHECK_OK(pthread_create(&th[i], NULL, pp_run, &s[i]));
    for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < 2; i++) CHECK(!s[i].err[0], "%s", s[i].err);
    /* retrieve leftover events so the CQs can be destroyed */
    int fl = fcntl(p.a.ch->fd, F_GETFL);
    for (int i = 0; i < 2; i++) {
        struct ibv_comp_channel *ch = i ? p.b.ch : p.a.ch;
        fcntl(ch->fd, F_SETFL, fl | O_NONBLOCK);
        struct ibv_cq *cq;
        void *ctx;
        while (ibv_get_cq_event(ch, &cq, &ctx) == 0) ibv_ack_cq_events(cq, 1);
    }
    pair_close(&p);
}

TEST_BOTH(event_driven_pingpong, 90) { pingpong_on_events(kind, 256); }

/* the stress that reproduced the overrun in most runs: CQs that hold 8 completions */
TEST_BOTH(event_driven_pingpong_small_cq, 90) { pingpong_on_events(kind, 8); }
