/* 5. completion channels and the rdma_cm event channel fd */
#include <fcntl.h>
#include <unistd.h>

#include "common.h"

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE

static void get_event(struct ibv_comp_channel *ch, struct ibv_cq *want_cq, void *want_ctx) {
    CHECK(fd_readable(ch->fd, TMO), "completion channel fd not readable within %d ms", TMO);
    struct ibv_cq *cq = NULL;
    void *ctx = NULL;
    CHECK_OK(ibv_get_cq_event(ch, &cq, &ctx));
    CHECK(cq == want_cq, "event for cq %p, expected %p", (void *)cq, (void *)want_cq);
    CHECK(ctx == want_ctx, "cq_context %p, expected %p", ctx, want_ctx);
    ibv_ack_cq_events(cq, 1);
}

static void set_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    CHECK(fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl O_NONBLOCK: %s", strerror(errno));
}

TEST_BOTH(comp_channel_notify, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.with_channel = 1;
    struct pair p;
    pair_open(&p, kind, &o);
    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW), *bmr = reg(p.b.pd, b, 8192, LW);
    struct ibv_comp_channel *ch = p.b.ch;
    CHECK(!fd_readable(ch->fd, 0), "fresh channel fd readable");
    CHECK_OK(ibv_req_notify_cq(p.b.rcq, 0));
    CHECK(!fd_readable(ch->fd, 50), "armed CQ without completions: fd readable");
    for (int round = 0; round < 3; round++) {
        post_recv(p.b.qp, 10 + round, b, 4096, bmr->lkey);
        post_send(p.a.qp, 20 + round, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
        get_event(ch, p.b.rcq, &p.b); /* cq_context of our CQs is the ep */
        struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 10 + round, IBV_WC_RECV, p.b.qp->qp_num, 100, 0, 0);
        wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 20 + round, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
        CHECK(!fd_readable(ch->fd, 0), "fd still readable after the event was read");
        CHECK_OK(ibv_req_notify_cq(p.b.rcq, 0)); /* re-arm for the next round */
    }
    /* not armed -> no event */
    struct ibv_wc wc;
    post_recv(p.b.qp, 30, b, 4096, bmr->lkey);
    post_send(p.a.qp, 31, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    get_event(ch, p.b.rcq, &p.b); /* armed at the end of the loop */
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 30, IBV_WC_RECV, p.b.qp->qp_num, 100, 0, 0);
    wc = wait_wc(p.a.scq, TMO);
    post_recv(p.b.qp, 32, b, 4096, bmr->lkey);
    post_send(p.a.qp, 33, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 32, IBV_WC_RECV, p.b.qp->qp_num, 100, 0, 0);
    wc = wait_wc(p.a.scq, TMO);
    CHECK(!fd_readable(ch->fd, 100), "completion on an unarmed CQ produced an event");
    pair_close(&p);
}

TEST(comp_channel_nonblock, 30) {
    struct dev d;
    dev_open(&d);
    struct ibv_comp_channel *ch = CHECK_PTR(ibv_create_comp_channel(d.ctx));
    struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d.ctx, 8, NULL, ch, 0));
    set_nonblock(ch->fd);
    struct ibv_cq *ecq;
    void *ectx;
    errno = 0;
    CHECK_EQ(ibv_get_cq_event(ch, &ecq, &ectx), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_OK(ibv_req_notify_cq(cq, 0));
    errno = 0;
    CHECK_EQ(ibv_get_cq_event(ch, &ecq, &ectx), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK(!fd_readable(ch->fd, 20), "readable without completions");
    CHECK_OK(ibv_destroy_cq(cq));
    CHECK_OK(ibv_destroy_comp_channel(ch));
    dev_close(&d);
}

TEST_BOTH(comp_channel_solicited, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.with_channel = 1;
    struct pair p;
    pair_open(&p, kind, &o);
    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW), *bmr = reg(p.b.pd, b, 8192, LW);
    for (int i = 0; i < 4; i++) post_recv(p.b.qp, 10 + i, b + i * 1024, 1024, bmr->lkey);
    CHECK_OK(ibv_req_notify_cq(p.b.rcq, 1));
    /* unsolicited SEND: completion, but no event */
    post_send(p.a.qp, 20, IBV_WR_SEND, a, 10, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 10, IBV_WC_RECV, p.b.qp->qp_num, 10, 0, 0);
    CHECK(!fd_readable(p.b.ch->fd, 200), "unsolicited completion woke a solicited-only CQ");
    /* solicited SEND: event */
    post_send(p.a.qp, 21, IBV_WR_SEND, a, 10, amr->lkey, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, 0, 0, 0);
    get_event(p.b.ch, p.b.rcq, &p.b);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 11, IBV_WC_RECV, p.b.qp->qp_num, 10, 0, 0);
    /* solicited WRITE_WITH_IMM: event */
    CHECK_OK(ibv_req_notify_cq(p.b.rcq, 1));
    post_send(p.a.qp, 22, IBV_WR_SEND_WITH_IMM, a, 10, amr->lkey, IBV_SEND_SIGNALED | IBV_SEND_SOLICITED, htonl(9), 0, 0);
    get_event(p.b.ch, p.b.rcq, &p.b);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 12, IBV_WC_RECV, p.b.qp->qp_num, 10, 1, htonl(9));
    for (int i = 0; i < 3; i++) {
        wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 20 + i, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    pair_close(&p);
}

/* one channel serving two CQs: each event names its CQ */
TEST(comp_channel_two_cqs, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.with_channel = 1;
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW), *bmr = reg(p.b.pd, b, 8192, LW);
    /* side a: its send CQ and its recv CQ share p.a.ch */
    CHECK_OK(ibv_req_notify_cq(p.a.scq, 0));
    CHECK_OK(ibv_req_notify_cq(p.a.rcq, 0));
    post_recv(p.a.qp, 1, a + 4096, 1024, amr->lkey);
    post_recv(p.b.qp, 2, b, 1024, bmr->lkey);
    post_send(p.a.qp, 3, IBV_WR_SEND, a, 10, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    post_send(p.b.qp, 4, IBV_WR_SEND, b + 2048, 10, bmr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    int seen_s = 0, seen_r = 0;
    for (int i = 0; i < 2; i++) {
        CHECK(fd_readable(p.a.ch->fd, TMO), "event %d", i);
        struct ibv_cq *cq;
        void *ctx;
        CHECK_OK(ibv_get_cq_event(p.a.ch, &cq, &ctx));
        CHECK(ctx == &p.a, "cq_context");
        if (cq == p.a.scq) seen_s++;
        else if (cq == p.a.rcq) seen_r++;
        else FAIL("event for unknown cq %p", (void *)cq);
        ibv_ack_cq_events(cq, 1);
    }
    CHECK(seen_s == 1 && seen_r == 1, "events: send cq %d, recv cq %d", seen_s, seen_r);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(p.a.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.a.qp->qp_num, 10, 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    wc = wait_wc(p.b.scq, TMO);
    /* several events acknowledged at once */
    int events = 0;
    for (int i = 0; i < 3; i++) {
        CHECK_OK(ibv_req_notify_cq(p.a.rcq, 0));
        post_recv(p.a.qp, 10 + i, a + 4096, 1024, amr->lkey);
        post_send(p.b.qp, 20 + i, IBV_WR_SEND, b, 10, bmr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
        CHECK(fd_readable(p.a.ch->fd, TMO), "event");
        struct ibv_cq *cq;
        void *ctx;
        CHECK_OK(ibv_get_cq_event(p.a.ch, &cq, &ctx));
        CHECK(cq == p.a.rcq, "cq");
        events++;
        wc = wait_wc(p.a.rcq, TMO);
        check_wc_ok(&wc, 10 + i, IBV_WC_RECV, p.a.qp->qp_num, 10, 0, 0);
        wc = wait_wc(p.b.scq, TMO);
    }
    ibv_ack_cq_events(p.a.rcq, events);
    pair_close(&p);
}

TEST(cm_event_channel_fd, 30) {
    struct rdma_event_channel *ec = cm_channel();
    CHECK(ec->fd >= 0, "fd");
    CHECK(!fd_readable(ec->fd, 0), "new channel readable");
    set_nonblock(ec->fd);
    struct rdma_cm_event *ev;
    errno = 0;
    CHECK_EQ(rdma_get_cm_event(ec, &ev), -1);
    CHECK_EQ(errno, EAGAIN);
    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(ec, &id, (void *)0x42, RDMA_PS_TCP));
    CHECK(id->context == (void *)0x42 && id->channel == ec, "id fields");
    struct sockaddr_in sa = test_sockaddr(4791);
    CHECK_OK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000));
    CHECK(fd_readable(ec->fd, TMO), "no event on the channel fd");
    CHECK_OK(rdma_get_cm_event(ec, &ev));
    CHECK_EQ(ev->event, RDMA_CM_EVENT_ADDR_RESOLVED);
    CHECK(ev->id == id && ev->id->context == (void *)0x42, "event id/context");
    CHECK_EQ(ev->status, 0);
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK(!fd_readable(ec->fd, 50), "fd readable after the only event was taken");
    errno = 0;
    CHECK_EQ(rdma_get_cm_event(ec, &ev), -1);
    CHECK_EQ(errno, EAGAIN);
    CHECK_OK(rdma_destroy_id(id));
    rdma_destroy_event_channel(ec);
}
