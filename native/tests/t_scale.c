/* 7. scale: 64 MiB through RDMA WRITE (and back with READ), 1000 QPs */
#include "common.h"

#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ)

TEST(scale_write_64m, 180) {
    const size_t total = 64u << 20, chunk = 1u << 20;
    struct qp_opts o;
    qp_opts_default(&o);
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    uint8_t *src = xalloc(total), *dst = xalloc(total), *back = xalloc(total);
    fill_pattern(src, total, 64);
    struct ibv_mr *smr = reg(p.a.pd, src, total, ALL_ACCESS);
    struct ibv_mr *bmr = reg(p.a.pd, back, total, ALL_ACCESS);
    struct ibv_mr *dmr = reg(p.b.pd, dst, total, ALL_ACCESS);
    double t0 = now_ms();
    size_t posted = 0, done = 0, n = total / chunk;
    const size_t window = 16;
    while (done < n) {
        while (posted < n && posted - done < window) {
            post_send(p.a.qp, posted, IBV_WR_RDMA_WRITE, src + posted * chunk, chunk, smr->lkey, IBV_SEND_SIGNALED, 0,
                      (uintptr_t)(dst + posted * chunk), dmr->rkey);
            posted++;
        }
        struct ibv_wc wc = wait_wc(p.a.scq, 30000);
        check_wc_ok(&wc, done, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
        done++;
    }
    double t1 = now_ms();
    uint64_t cs = checksum64(src, total), cd = checksum64(dst, total);
    CHECK(cs == cd && !memcmp(src, dst, total), "64 MiB WRITE: checksum src %016llx dst %016llx", (unsigned long long)cs,
          (unsigned long long)cd);
    /* and back with READs of 4 MiB */
    const size_t rchunk = 4u << 20;
    for (size_t i = 0; i < total / rchunk; i++)
        post_send(p.a.qp, 1000 + i, IBV_WR_RDMA_READ, back + i * rchunk, rchunk, bmr->lkey, IBV_SEND_SIGNALED, 0,
                  (uintptr_t)(dst + i * rchunk), dmr->rkey);
    for (size_t i = 0; i < total / rchunk; i++) {
        struct ibv_wc wc = wait_wc(p.a.scq, 30000);
        check_wc_ok(&wc, 1000 + i, IBV_WC_RDMA_READ, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    double t2 = now_ms();
    CHECK(checksum64(back, total) == cs, "64 MiB READ back: checksum differs");
    LOG("64 MiB: WRITE %.0f ms (%.0f MB/s), READ %.0f ms (%.0f MB/s), checksum %016llx", t1 - t0,
        total / 1e3 / (t1 - t0), t2 - t1, total / 1e3 / (t2 - t1), (unsigned long long)cs);
    pair_close(&p);
}

TEST(scale_1000_qps, 240) {
    const int NQP = 1000, NP = NQP / 2;
    struct dev d;
    dev_open(&d);
    if (d.attr.max_qp < NQP + 8) {
        int m = d.attr.max_qp;
        dev_close(&d);
        SKIP("device max_qp %d < %d", m, NQP);
    }
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    int cqe = 2 * NQP;
    if (cqe > d.attr.max_cqe) cqe = d.attr.max_cqe;
    struct ibv_cq *scq = CHECK_PTR(ibv_create_cq(d.ctx, cqe, NULL, NULL, 0));
    struct ibv_cq *rcq = CHECK_PTR(ibv_create_cq(d.ctx, cqe, NULL, NULL, 0));
    struct ibv_qp **qp = CHECK_PTR(calloc(NQP, sizeof *qp));
    uint32_t *qpn_to_idx_key = CHECK_PTR(calloc(NQP, sizeof *qpn_to_idx_key));
    uint8_t *buf = xalloc((size_t)NQP * 128);
    struct ibv_mr *mr = reg(pd, buf, (size_t)NQP * 128, IBV_ACCESS_LOCAL_WRITE);
    double t0 = now_ms();
    for (int i = 0; i < NQP; i++) {
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        ia.send_cq = scq;
        ia.recv_cq = rcq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = 2;
        ia.cap.max_recv_wr = 2;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        qp[i] = ibv_create_qp(pd, &ia);
        if (!qp[i]) FAIL("ibv_create_qp #%d: %s", i, strerror(errno));
        qpn_to_idx_key[i] = qp[i]->qp_num;
    }
    for (int i = 0; i < NQP; i++) qp_to_init(qp[i], d.port);
    for (int i = 0; i < NQP; i++) {
        int peer = i ^ 1;
        qp_to_rtr(qp[i], &d, qp[peer]->qp_num, 100, 1);
    }
    for (int i = 0; i < NQP; i++) qp_to_rts(qp[i], &d, 100, 14, 7, 7);
    double t1 = now_ms();
    for (int i = 0; i < NQP; i++) post_recv(qp[i], i, buf + i * 128, 64, mr->lkey);
    for (int i = 0; i < NQP; i++) {
        uint32_t v = 0xabc00000u + i;
        memcpy(buf + i * 128 + 64, &v, 4);
        post_send(qp[i], i, IBV_WR_SEND, buf + i * 128 + 64, 4, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    }
    char *seen_s = CHECK_PTR(calloc(NQP, 1)), *seen_r = CHECK_PTR(calloc(NQP, 1));
    for (int k = 0; k < 2 * NQP; k++) {
        int from_r = 0;
        struct ibv_wc wc;
        double end = now_ms() + 30000;
        for (;;) {
            int n = ibv_poll_cq(rcq, 1, &wc);
            if (n == 1) { from_r = 1; break; }
            n = ibv_poll_cq(scq, 1, &wc);
            if (n == 1) break;
            if (now_ms() > end) FAIL("completions: %d of %d", k, 2 * NQP);
        }
        CHECK(wc.wr_id < (uint64_t)NQP, "wr_id %llu", (unsigned long long)wc.wr_id);
        int i = wc.wr_id;
        if (from_r) {
            check_wc_ok(&wc, i, IBV_WC_RECV, qp[i]->qp_num, 4, 0, 0);
            uint32_t v;
            memcpy(&v, buf + i * 128, 4);
            CHECK(v == 0xabc00000u + (i ^ 1), "QP %d received %08x from the wrong peer", i, v);
            CHECK(!seen_r[i]++, "duplicate receive on QP %d", i);
        } else {
            check_wc_ok(&wc, i, IBV_WC_SEND, qp[i]->qp_num, WC_ANY_LEN, 0, 0);
            CHECK(!seen_s[i]++, "duplicate send completion on QP %d", i);
        }
    }
    double t2 = now_ms();
    LOG("%d QPs: create+connect %.0f ms, %d sends %.0f ms", NQP, t1 - t0, NQP, t2 - t1);
    (void)NP;
    for (int i = 0; i < NQP; i++) CHECK_OK(ibv_destroy_qp(qp[i]));
    dereg(mr);
    CHECK_OK(ibv_destroy_cq(scq));
    CHECK_OK(ibv_destroy_cq(rcq));
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
    free(qp);
    free(qpn_to_idx_key);
    free(seen_s);
    free(seen_r);
}

/*
 * QPs created and destroyed while the progress thread walks the QP table. A SEND without a RECV
 * (rnr_retry 7, min_rnr_timer 0.01 ms) keeps the progress thread scanning every QP about every
 * 10 us; meanwhile this thread creates and destroys QPs. A QP visible in the table before it is
 * fully initialised (reference count still 0) was freed by the scan under its creator
 * (heap-use-after-free; a SIGSEGV in scale_1000_qps when the first scan of a freshly started
 * device overlapped its QP creation loop).
 */
TEST(scale_qp_create_during_scan, 120) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.rnr_retry = 7;
    o.min_rnr_timer = 1; /* 0.01 ms: the progress thread retries, and so scans, constantly */
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    uint8_t *a = xalloc(4096), *b = xalloc(4096);
    struct ibv_mr *amr = reg(p.a.pd, a, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_mr *bmr = reg(p.b.pd, b, 4096, IBV_ACCESS_LOCAL_WRITE);
    fill_pattern(a, 64, 9);
    post_send(p.a.qp, 1, IBV_WR_SEND, a, 64, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    enum { BATCH = 64 };
    struct ibv_qp *qp[BATCH];
    double end = now_ms() + 2000;
    long created = 0;
    while (now_ms() < end) {
        for (int i = 0; i < BATCH; i++) {
            struct ibv_qp_init_attr ia;
            memset(&ia, 0, sizeof ia);
            ia.send_cq = p.a.scq;
            ia.recv_cq = p.a.rcq;
            ia.qp_type = IBV_QPT_RC;
            ia.cap.max_send_wr = ia.cap.max_recv_wr = 1;
            ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
            qp[i] = ibv_create_qp(p.a.pd, &ia);
            if (!qp[i]) FAIL("ibv_create_qp #%ld: %s", created, strerror(errno));
            created++;
        }
        for (int i = 0; i < BATCH; i++) {
            CHECK_EQ(qp_state(qp[i]), IBV_QPS_RESET);
            CHECK_OK(ibv_destroy_qp(qp[i]));
        }
    }
    CHECK_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    post_recv(p.b.qp, 2, b, 4096, bmr->lkey);
    struct ibv_wc wc = wait_wc(p.b.rcq, 10000);
    check_wc_ok(&wc, 2, IBV_WC_RECV, p.b.qp->qp_num, 64, 0, 0);
    CHECK(check_pattern(b, 64, 9), "data");
    wc = wait_wc(p.a.scq, 10000);
    check_wc_ok(&wc, 1, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    LOG("%ld QPs created and destroyed during the RNR retry loop", created);
    pair_close(&p);
}
