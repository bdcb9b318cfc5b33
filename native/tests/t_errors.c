/* 3. remote/local access errors, QP to ERR, flush; 4. RNR */
#include "common.h"

#include <fcntl.h>

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE

/* The requester QP must be in ERR after an error completion, and every WR still queued or posted
 * later completes with IBV_WC_WR_FLUSH_ERR. */
static void expect_flushed_after_error(struct pair *p, uint8_t *abuf, struct ibv_mr *amr, uint64_t first_id, int queued) {
    for (int i = 0; i < queued; i++) {
        struct ibv_wc wc = wait_wc(p->a.scq, TMO);
        check_wc_err(&wc, first_id + i, IBV_WC_WR_FLUSH_ERR, p->a.qp->qp_num);
    }
    wait_qp_state(p->a.qp, IBV_QPS_ERR, 2000);
    post_send(p->a.qp, 999, IBV_WR_SEND, abuf, 8, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p->a.scq, TMO);
    check_wc_err(&wc, 999, IBV_WC_WR_FLUSH_ERR, p->a.qp->qp_num);
    post_send(p->a.qp, 1000, IBV_WR_RDMA_WRITE, abuf, 8, amr->lkey, 0, 0, 0, 0); /* unsignalled, in ERR */
    post_recv(p->a.qp, 1001, abuf, 8, amr->lkey);
    /* kernel rxe (6.1) never flushes a receive posted in ERR (the user-space ring is not looked at) */
    if (!sr_object_count && !ibv_poll_cq(p->a.rcq, 1, &wc)) {
        msleep(200);
        if (!ibv_poll_cq(p->a.rcq, 1, &wc)) {
            LOG("known rxe deviation: receive posted in ERR not flushed");
            return;
        }
    } else if (sr_object_count)
        wc = wait_wc(p->a.rcq, TMO);
    check_wc_err(&wc, 1001, IBV_WC_WR_FLUSH_ERR, p->a.qp->qp_num);
}

/* IBA 11.6.3.1: the responder of a refused RDMA operation (no receive WQE to complete in error) raises the
 * affiliated asynchronous error Local Access Violation Work Queue Error, IBV_EVENT_QP_ACCESS_ERR, for its QP. */
static void expect_access_event(struct ibv_qp *responder) {
    struct ibv_context *ctx = responder->context;
    int fl = fcntl(ctx->async_fd, F_GETFL);
    CHECK(fl >= 0 && fcntl(ctx->async_fd, F_SETFL, fl | O_NONBLOCK) == 0, "fcntl");
    struct ibv_async_event ev;
    int found = 0;
    /* the software device queues it before the requester's error completion; kernel rxe 6.1 raises none */
    double deadline = now_ms() + (sr_object_count ? 2000 : 500);
    while (!found && now_ms() < deadline) {
        if (!fd_readable(ctx->async_fd, 100)) continue;
        if (ibv_get_async_event(ctx, &ev)) continue;
        LOG("async event %s", ibv_event_type_str(ev.event_type));
        found = ev.event_type == IBV_EVENT_QP_ACCESS_ERR && ev.element.qp == responder;
        ibv_ack_async_event(&ev);
    }
    CHECK(fcntl(ctx->async_fd, F_SETFL, fl) == 0, "fcntl");
    if (!found && !sr_object_count) {
        LOG("known rxe deviation: no IBV_EVENT_QP_ACCESS_ERR for the responder of a refused RDMA operation");
        return;
    }
    CHECK(found, "no IBV_EVENT_QP_ACCESS_ERR for the responder's QP 0x%x", responder->qp_num);
}

enum variant { NO_REMOTE_WRITE, OUT_OF_BOUNDS, WRONG_RKEY, NO_REMOTE_READ, UNSIGNALLED };

static void remote_access_error(int kind, enum variant v) {
    struct qp_opts o;
    qp_opts_default(&o);
    struct pair p;
    pair_open(&p, kind, &o);
    size_t len = 8192;
    uint8_t *a = xalloc(65536), *b = xalloc(65536);
    struct ibv_mr *amr = reg(p.a.pd, a, 65536, LW);
    int access = LW | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    if (v == NO_REMOTE_WRITE || v == UNSIGNALLED) access = LW | IBV_ACCESS_REMOTE_READ;
    if (v == NO_REMOTE_READ) access = LW | IBV_ACCESS_REMOTE_WRITE;
    /* target region in the middle of a page-aligned buffer; the bytes around it are guarded too */
    uint8_t *target = b + 4096;
    struct ibv_mr *bmr = reg(p.b.pd, target, len, access);
    fill_pattern(b, 65536, 4242);
    fill_pattern(a, 65536, 1);
    uint64_t raddr = (uintptr_t)target;
    uint32_t rkey = bmr->rkey, wlen = 256;
    enum ibv_wr_opcode op = v == NO_REMOTE_READ ? IBV_WR_RDMA_READ : IBV_WR_RDMA_WRITE;
    if (v == OUT_OF_BOUNDS) {
        raddr = (uintptr_t)target + len - 16; /* 16 bytes inside, 240 outside */
    }
    if (v == WRONG_RKEY) rkey = bmr->rkey ^ 0x00ffff00;
    uint8_t *lbuf = a + 1024;
    if (v == UNSIGNALLED) {
        /* a successful unsignalled WR first: no CQE for it */
        post_send(p.a.qp, 1, IBV_WR_SEND, a, 4, amr->lkey, 0, 0, 0, 0);
        uint8_t *rb = xalloc(4096);
        post_recv(p.b.qp, 2, rb, 64, reg(p.b.pd, rb, 4096, LW)->lkey);
        struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 2, IBV_WC_RECV, p.b.qp->qp_num, 4, 0, 0);
    }
    /* the failing WR followed by two more in the same post */
    struct ibv_sge s[3] = {sge(lbuf, wlen, amr->lkey), sge(a, 8, amr->lkey), sge(a, 8, amr->lkey)};
    struct ibv_send_wr wr[3], *bad;
    memset(wr, 0, sizeof wr);
    for (int i = 0; i < 3; i++) {
        wr[i].wr_id = 10 + i;
        wr[i].sg_list = &s[i];
        wr[i].num_sge = 1;
        wr[i].next = i < 2 ? &wr[i + 1] : NULL;
        wr[i].send_flags = IBV_SEND_SIGNALED;
        wr[i].opcode = IBV_WR_RDMA_WRITE;
        wr[i].wr.rdma.remote_addr = (uintptr_t)b + 30000; /* outside the MR: never executed anyway */
        wr[i].wr.rdma.rkey = bmr->rkey;
    }
    wr[0].opcode = op;
    wr[0].wr.rdma.remote_addr = raddr;
    wr[0].wr.rdma.rkey = rkey;
    if (v == UNSIGNALLED) wr[0].send_flags = 0;
    wr[1].opcode = IBV_WR_SEND;
    CHECK_OK(ibv_post_send(p.a.qp, wr, &bad));
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_err(&wc, 10, IBV_WC_REM_ACCESS_ERR, p.a.qp->qp_num);
    expect_flushed_after_error(&p, a, amr, 11, 2);
    expect_access_event(p.b.qp);
    /* target memory unchanged (for READ: the local buffer unchanged) */
    CHECK(check_pattern(b, 65536, 4242), "remote memory was modified by a refused operation");
    if (v == NO_REMOTE_READ) {
        uint8_t *ref = xalloc(65536);
        fill_pattern(ref, 65536, 1);
        CHECK(!memcmp(a + 1024, ref + 1024, wlen), "local READ target modified by a refused READ");
    }
    pair_close(&p);
}

TEST_BOTH(err_write_without_remote_write, 30) { remote_access_error(kind, NO_REMOTE_WRITE); }
TEST_BOTH(err_write_out_of_bounds, 30) { remote_access_error(kind, OUT_OF_BOUNDS); }
TEST_BOTH(err_write_wrong_rkey, 30) { remote_access_error(kind, WRONG_RKEY); }
TEST_BOTH(err_read_without_remote_read, 30) { remote_access_error(kind, NO_REMOTE_READ); }
TEST_BOTH(err_unsignalled_failing_wr, 30) { remote_access_error(kind, UNSIGNALLED); }

TEST_BOTH(err_bad_lkey, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW), *bmr = reg(p.b.pd, b, 8192, LW | IBV_ACCESS_REMOTE_WRITE);
    post_recv(p.b.qp, 1, b, 4096, bmr->lkey);
    post_send(p.a.qp, 2, IBV_WR_SEND, a, 100, amr->lkey ^ 0x00ffff00, IBV_SEND_SIGNALED, 0, 0, 0);
    post_send(p.a.qp, 3, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    /* IB spec: invalid L_Key -> Local Protection Error. Kernel rxe 6.1 reports LOC_QP_OP_ERR. */
    if (!(wc.status == IBV_WC_LOC_QP_OP_ERR && !sr_object_count)) check_wc_err(&wc, 2, IBV_WC_LOC_PROT_ERR, p.a.qp->qp_num);
    expect_flushed_after_error(&p, a, amr, 3, 1);
    /* a local buffer outside the MR with the right lkey: also a protection error */
    pair_close(&p);
    pair_open(&p, kind, NULL);
    amr = reg(p.a.pd, a, 4096, LW);
    bmr = reg(p.b.pd, b, 8192, LW | IBV_ACCESS_REMOTE_WRITE);
    post_send(p.a.qp, 4, IBV_WR_RDMA_WRITE, a + 4000, 200, amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)b, bmr->rkey);
    wc = wait_wc(p.a.scq, TMO);
    if (!(wc.status == IBV_WC_LOC_QP_OP_ERR && !sr_object_count)) check_wc_err(&wc, 4, IBV_WC_LOC_PROT_ERR, p.a.qp->qp_num);
    wait_qp_state(p.a.qp, IBV_QPS_ERR, 2000);
    /* the lkey of an MR from another PD is a protection error as well */
    pair_close(&p);
}

TEST_BOTH(err_recv_too_small, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW), *bmr = reg(p.b.pd, b, 8192, LW);
    memset(b, 0x33, 8192);
    post_recv(p.b.qp, 1, b, 16, bmr->lkey);
    post_recv(p.b.qp, 2, b + 4096, 16, bmr->lkey);
    post_send(p.a.qp, 3, IBV_WR_SEND, a, 64, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    /* IB spec: the receive WQE completes with Local Length Error. Kernel rxe reports
     * IBV_WC_LOC_QP_OP_ERR (6.1) or IBV_WC_REM_INV_REQ_ERR (newer, rxe_resp.c RESPST_ERR_LENGTH). */
    if (!((wc.status == IBV_WC_REM_INV_REQ_ERR || wc.status == IBV_WC_LOC_QP_OP_ERR) && !sr_object_count))
        check_wc_err(&wc, 1, IBV_WC_LOC_LEN_ERR, p.b.qp->qp_num);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_err(&wc, 2, IBV_WC_WR_FLUSH_ERR, p.b.qp->qp_num);
    wait_qp_state(p.b.qp, IBV_QPS_ERR, 2000);
    wc = wait_wc(p.a.scq, TMO);
    CHECK(wc.wr_id == 3 && wc.status != IBV_WC_SUCCESS, "requester: wr_id %llu status %s (expected an error)",
          (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status));
    LOG("requester status %s", ibv_wc_status_str(wc.status));
    pair_close(&p);
}

/* RNR: SEND without a posted RECV, rnr_retry 7 = retry forever; the RECV posted later completes it */
TEST(rnr_retry_infinite, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.rnr_retry = 7;
    o.min_rnr_timer = 1; /* 0.01 ms */
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW), *bmr = reg(p.b.pd, b, 8192, LW);
    fill_pattern(a, 3000, 5);
    post_send(p.a.qp, 1, IBV_WR_SEND, a, 3000, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    post_send(p.a.qp, 2, IBV_WR_SEND_WITH_IMM, a, 10, amr->lkey, IBV_SEND_SIGNALED, htonl(2), 0, 0);
    expect_no_wc(p.a.scq, 500);
    expect_no_wc(p.b.rcq, 1);
    CHECK_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    post_recv(p.b.qp, 3, b, 4096, bmr->lkey);
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_RECV, p.b.qp->qp_num, 3000, 0, 0);
    CHECK(check_pattern(b, 3000, 5), "data");
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    expect_no_wc(p.a.scq, 200); /* second SEND still waiting */
    post_recv(p.b.qp, 4, b + 4096, 4096, bmr->lkey);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 4, IBV_WC_RECV, p.b.qp->qp_num, 10, 1, htonl(2));
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    pair_close(&p);
}

TEST(rnr_retry_exceeded, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.rnr_retry = 1;
    o.min_rnr_timer = 1;
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    uint8_t *a = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW);
    post_send(p.a.qp, 1, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    post_send(p.a.qp, 2, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.a.scq, 10000);
    check_wc_err(&wc, 1, IBV_WC_RNR_RETRY_EXC_ERR, p.a.qp->qp_num);
    expect_flushed_after_error(&p, a, amr, 2, 1);
    pair_close(&p);
}

/* a completion queue with room for fewer CQEs than arrive: the QP must not silently lose them.
 * (Overrun is an error; we only check that a CQ sized for the traffic loses nothing.) */
TEST_BOTH(cq_exact_size, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.cq_size = 16;
    o.max_send_wr = 16;
    o.max_recv_wr = 16;
    struct pair p;
    pair_open(&p, kind, &o);
    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW), *bmr = reg(p.b.pd, b, 8192, LW);
    for (int r = 0; r < 10; r++) {
        for (int i = 0; i < 16; i++) post_recv(p.b.qp, i, b + i * 64, 64, bmr->lkey);
        for (int i = 0; i < 16; i++) post_send(p.a.qp, i, IBV_WR_SEND, a, 8, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
        /* let all 16 land in each CQ before polling */
        msleep(20);
        struct ibv_wc wc[16];
        int got = 0;
        double end = now_ms() + TMO;
        while (got < 16 && now_ms() < end) {
            int n = ibv_poll_cq(p.b.rcq, 16 - got, wc + got);
            CHECK(n >= 0, "poll %d", n);
            got += n;
        }
        CHECK_EQ(got, 16);
        for (int i = 0; i < 16; i++) check_wc_ok(&wc[i], i, IBV_WC_RECV, p.b.qp->qp_num, 8, 0, 0);
        for (got = 0; got < 16;) {
            int n = ibv_poll_cq(p.a.scq, 16 - got, wc + got);
            CHECK(n >= 0, "poll %d", n);
            got += n;
            if (now_ms() > end) FAIL("send completions: %d of 16", got);
        }
        for (int i = 0; i < 16; i++) check_wc_ok(&wc[i], i, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    pair_close(&p);
}
