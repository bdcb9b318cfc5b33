/* 13. memory windows: type 2 windows bound by a BIND_MW work request are valid on their QP alone, within their
 * range and with their own access; LOCAL_INV and SEND_WITH_INV invalidate them; type 1 windows (ibv_bind_mw)
 * are valid on every QP of the PD. The MRs behind the windows grant no remote access themselves unless said. */
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common.h"

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE
#define RW IBV_ACCESS_REMOTE_WRITE
#define RR IBV_ACCESS_REMOTE_READ
#define BIND IBV_ACCESS_MW_BIND
#define SZ 16384 /* responder buffer: the window is [WOFF, WOFF + WLEN) of it */
#define WOFF 4096
#define WLEN 8192

/* two requester QPs a[i] (PD pda) connected to two responder QPs b[i] that share one PD (pdb) */
struct side {
    struct ibv_qp *qp;
    struct ibv_cq *scq, *rcq;
};
struct env {
    struct dev dev;
    struct ibv_pd *pda, *pdb;
    struct side a[2], b[2];
    int n;
};

static void side_open(struct env *e, struct side *s, struct ibv_pd *pd) {
    s->scq = CHECK_PTR(ibv_create_cq(e->dev.ctx, 64, NULL, NULL, 0));
    s->rcq = CHECK_PTR(ibv_create_cq(e->dev.ctx, 64, NULL, NULL, 0));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = s->scq;
    ia.recv_cq = s->rcq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 16;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    s->qp = CHECK_PTR(ibv_create_qp(pd, &ia));
    qp_to_init(s->qp, e->dev.port);
}

static void env_open(struct env *e, int n) {
    memset(e, 0, sizeof *e);
    dev_open(&e->dev);
    const struct ibv_device_attr *da = &e->dev.attr;
    if (!(da->device_cap_flags & IBV_DEVICE_MEM_WINDOW) || !(da->device_cap_flags & IBV_DEVICE_MEM_WINDOW_TYPE_2B) ||
        da->max_mw <= 0) {
        dev_close(&e->dev);
        SKIP("device reports no type 2B memory windows (device_cap_flags 0x%x, max_mw %d)", da->device_cap_flags,
             da->max_mw);
    }
    e->n = n;
    e->pda = CHECK_PTR(ibv_alloc_pd(e->dev.ctx));
    e->pdb = CHECK_PTR(ibv_alloc_pd(e->dev.ctx));
    for (int i = 0; i < n; i++) {
        side_open(e, &e->a[i], e->pda);
        side_open(e, &e->b[i], e->pdb);
        uint32_t pa = 0x100 + i, pb = 0x200 + i;
        qp_to_rtr(e->a[i].qp, &e->dev, e->b[i].qp->qp_num, pb, 1);
        qp_to_rtr(e->b[i].qp, &e->dev, e->a[i].qp->qp_num, pa, 1);
        qp_to_rts(e->a[i].qp, &e->dev, pa, 14, 7, 7);
        qp_to_rts(e->b[i].qp, &e->dev, pb, 14, 7, 7);
    }
}

static void env_close(struct env *e) {
    for (int i = 0; i < e->n; i++) {
        struct side *s[2] = {&e->a[i], &e->b[i]};
        for (int j = 0; j < 2; j++) {
            CHECK_OK(ibv_destroy_qp(s[j]->qp));
            CHECK_OK(ibv_destroy_cq(s[j]->scq));
            CHECK_OK(ibv_destroy_cq(s[j]->rcq));
        }
    }
    dereg_pd(e->pda);
    dereg_pd(e->pdb);
    CHECK_OK(ibv_dealloc_pd(e->pda));
    CHECK_OK(ibv_dealloc_pd(e->pdb));
    dev_close(&e->dev);
}

/* post a signalled BIND_MW of mw to [addr, addr+len) of mr with the next 8-bit key; returns the new rkey */
static uint32_t post_bind(struct ibv_qp *qp, uint64_t wr_id, struct ibv_mw *mw, struct ibv_mr *mr, void *addr,
                          uint64_t len, unsigned access) {
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_BIND_MW;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    wr.bind_mw.bind_info.mr = mr;
    wr.bind_mw.bind_info.addr = (uintptr_t)addr;
    wr.bind_mw.bind_info.length = len;
    wr.bind_mw.bind_info.mw_access_flags = access;
    int rc = ibv_post_send(qp, &wr, &bad);
    if (rc) FAIL("ibv_post_send(BIND_MW): %d (%s)", rc, strerror(rc));
    return wr.bind_mw.rkey;
}

/* bind and wait for the successful BIND_MW completion; keeps mw->rkey current, as a consumer of type 2 must */
static uint32_t bind_ok(struct side *s, struct ibv_mw *mw, struct ibv_mr *mr, void *addr, uint64_t len,
                        unsigned access) {
    uint32_t old = mw->rkey, rkey = post_bind(s->qp, 77, mw, mr, addr, len, access);
    struct ibv_wc wc = wait_wc(s->scq, TMO);
    check_wc_ok(&wc, 77, IBV_WC_BIND_MW, s->qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK((rkey & ~0xffu) == (old & ~0xffu) && rkey != old, "new rkey 0x%x from 0x%x", rkey, old);
    mw->rkey = rkey;
    return rkey;
}

static void post_local_inv(struct ibv_qp *qp, uint64_t wr_id, uint32_t rkey) {
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.opcode = IBV_WR_LOCAL_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = rkey;
    int rc = ibv_post_send(qp, &wr, &bad);
    if (rc) FAIL("ibv_post_send(LOCAL_INV): %d (%s)", rc, strerror(rc));
}

/* RDMA WRITE of len bytes (pattern seed) from a to raddr/rkey; returns the completion status */
static enum ibv_wc_status rdma(struct side *a, enum ibv_wr_opcode op, void *buf, struct ibv_mr *amr, uint32_t len,
                               uint64_t raddr, uint32_t rkey, uint64_t wr_id) {
    post_send(a->qp, wr_id, op, buf, len, amr->lkey, IBV_SEND_SIGNALED, 0, raddr, rkey);
    struct ibv_wc wc = wait_wc(a->scq, TMO);
    if (wc.status == IBV_WC_SUCCESS)
        check_wc_ok(&wc, wr_id, op == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE, a->qp->qp_num,
                    WC_ANY_LEN, 0, 0);
    else
        CHECK(wc.wr_id == wr_id && wc.qp_num == a->qp->qp_num, "error wc wr_id %llu qp 0x%x",
              (unsigned long long)wc.wr_id, wc.qp_num);
    return wc.status;
}

static void expect_access_err(enum ibv_wc_status st, const char *what) {
    CHECK(st == IBV_WC_REM_ACCESS_ERR, "%s: status %s, expected REM_ACCESS_ERR", what, ibv_wc_status_str(st));
}

static void check_bytes(const uint8_t *p, size_t len, uint8_t v, const char *what) {
    for (size_t i = 0; i < len; i++)
        if (p[i] != v) FAIL("%s: byte %zu is 0x%02x, expected 0x%02x", what, i, p[i], v);
}

/* IBV_WC_WITH_INV on a receive completion. Kernel rxe (6.1) with rdma-core's rxe provider reports bit 2 (the
 * kernel's IB_WC_WITH_INVALIDATE, which is IBV_WC_IP_CSUM_OK in <infiniband/verbs.h>) instead of bit 3
 * (IBV_WC_WITH_INV): tolerated only when not running on the software device */
static void check_with_inv(const struct ibv_wc *wc, uint32_t rkey) {
    if (!(wc->wc_flags & IBV_WC_WITH_INV)) {
        if (!sr_object_count && (wc->wc_flags & IBV_WC_IP_CSUM_OK))
            LOG("tolerated on this device: wc_flags 0x%x has the kernel's IB_WC_WITH_INVALIDATE bit", wc->wc_flags);
        else
            FAIL("wc_flags 0x%x lacks IBV_WC_WITH_INV", wc->wc_flags);
    }
    CHECK(!(wc->wc_flags & IBV_WC_WITH_IMM), "wc_flags 0x%x has IBV_WC_WITH_IMM", wc->wc_flags);
    CHECK_EQ(wc->invalidated_rkey, rkey);
}

/* the device advertises windows; alloc and dealloc of both types; a PD with a window cannot be freed */
TEST(mw_alloc_dealloc, 20) {
    struct env e;
    env_open(&e, 0);
    LOG("max_mw %d device_cap_flags 0x%x", e.dev.attr.max_mw, e.dev.attr.device_cap_flags);
    struct ibv_mw *w2 = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    struct ibv_mw *w1 = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_1));
    CHECK(w2->context == e.dev.ctx && w2->pd == e.pdb && w2->type == IBV_MW_TYPE_2, "type 2 window fields");
    CHECK(w1->context == e.dev.ctx && w1->pd == e.pdb && w1->type == IBV_MW_TYPE_1, "type 1 window fields");
    CHECK(w1->rkey != w2->rkey, "two windows, one rkey 0x%x", w1->rkey);
    if (sr_object_count) CHECK_EQ(sr_object_count("mw"), 2);
    CHECK(ibv_dealloc_pd(e.pdb) != 0, "ibv_dealloc_pd of a PD with windows succeeded");
    CHECK_OK(ibv_dealloc_mw(w2));
    CHECK_OK(ibv_dealloc_mw(w1));
    if (sr_object_count) CHECK_EQ(sr_object_count("mw"), 0);
    env_close(&e);
}

/* the MR grants only MW_BIND: remote write and read go through the window's rkey; the MR's rkey is refused */
static void bind_write_read(struct pair *p) {
    uint8_t *a = xalloc(SZ), *b = xalloc(SZ);
    struct ibv_mr *amr = reg(p->a.pd, a, SZ, LW), *bmr = reg(p->b.pd, b, SZ, LW | BIND);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(p->b.pd, IBV_MW_TYPE_2));
    struct side sa = {p->a.qp, p->a.scq, p->a.rcq}, sb = {p->b.qp, p->b.scq, p->b.rcq};
    uint32_t rkey = bind_ok(&sb, mw, bmr, b + WOFF, WLEN, RW | RR);
    fill_pattern(a, WLEN, 7);
    CHECK_EQ(rdma(&sa, IBV_WR_RDMA_WRITE, a, amr, WLEN, (uintptr_t)b + WOFF, rkey, 1), IBV_WC_SUCCESS);
    CHECK(check_pattern(b + WOFF, WLEN, 7), "data written through the window");
    check_bytes(b, WOFF, 0, "before the window");
    check_bytes(b + WOFF + WLEN, SZ - WOFF - WLEN, 0, "after the window");
    fill_pattern(b + WOFF + 100, 1000, 9);
    memset(a, 0, SZ);
    CHECK_EQ(rdma(&sa, IBV_WR_RDMA_READ, a, amr, 1000, (uintptr_t)b + WOFF + 100, rkey, 2), IBV_WC_SUCCESS);
    CHECK(check_pattern(a, 1000, 9), "data read through the window");
    /* invalidate on the window's QP, then free it */
    post_local_inv(p->b.qp, 3, rkey);
    struct ibv_wc wc = wait_wc(p->b.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_LOCAL_INV, p->b.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK_OK(ibv_dealloc_mw(mw));
    /* the MR's own rkey grants nothing remote */
    memset(b, 0, SZ);
    expect_access_err(rdma(&sa, IBV_WR_RDMA_WRITE, a, amr, 64, (uintptr_t)b + WOFF, bmr->rkey, 4), "write with the MR's rkey");
    check_bytes(b, SZ, 0, "memory after a refused write");
}

TEST_BOTH(mw_bind_write_read, 30) {
    struct env probe;
    env_open(&probe, 0); /* skips where windows are not advertised */
    env_close(&probe);
    struct pair p;
    pair_open(&p, kind, NULL);
    bind_write_read(&p);
    pair_close(&p);
}

/* a window's rkey is refused on another QP of the same PD (and changes no byte); the MR's rkey works PD-wide */
TEST(mw_other_qp_same_pd, 30) {
    struct env e;
    env_open(&e, 2);
    uint8_t *a = xalloc(SZ), *b = xalloc(SZ);
    struct ibv_mr *amr = reg(e.pda, a, SZ, LW), *bmr = reg(e.pdb, b, SZ, LW | RW | BIND);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    uint32_t rkey = bind_ok(&e.b[0], mw, bmr, b + WOFF, WLEN, RW);
    fill_pattern(a, SZ, 3);
    /* the MR's rkey is valid on every QP of its PD */
    CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 64, (uintptr_t)b, bmr->rkey, 1), IBV_WC_SUCCESS);
    CHECK_EQ(rdma(&e.a[1], IBV_WR_RDMA_WRITE, a, amr, 64, (uintptr_t)b + 64, bmr->rkey, 2), IBV_WC_SUCCESS);
    CHECK(check_pattern(b, 64, 3) && check_pattern(b + 64, 64, 3), "writes with the MR's rkey on both QPs");
    /* the window's rkey works on its QP ... */
    CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 256, (uintptr_t)b + WOFF, rkey, 3), IBV_WC_SUCCESS);
    memset(b, 0x5c, SZ);
    /* ... and nowhere else */
    expect_access_err(rdma(&e.a[1], IBV_WR_RDMA_WRITE, a, amr, 256, (uintptr_t)b + WOFF, rkey, 4),
                      "write with the window's rkey on another QP of the PD");
    check_bytes(b, SZ, 0x5c, "memory after the refused write");
    wait_qp_state(e.b[1].qp, IBV_QPS_ERR, TMO);
    /* the window's own QP is untouched */
    CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 256, (uintptr_t)b + WOFF, rkey, 5), IBV_WC_SUCCESS);
    CHECK(check_pattern(b + WOFF, 256, 3), "write through the window after the refusal elsewhere");
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

/* outside the window (but inside the MR) and without the window's access right: remote access error, no byte moved */
TEST(mw_bounds_and_access, 60) {
    struct {
        const char *what;
        enum ibv_wr_opcode op;
        int64_t off; /* from the window's start */
        uint32_t len;
    } cases[] = {
        {"write to a read-only window", IBV_WR_RDMA_WRITE, 0, 64},
        {"read across the window's end", IBV_WR_RDMA_READ, WLEN - 32, 64},
        {"read before the window", IBV_WR_RDMA_READ, -64, 64},
        {"read after the window", IBV_WR_RDMA_READ, WLEN, 64},
    };
    for (unsigned c = 0; c < sizeof cases / sizeof *cases; c++) {
        struct env e;
        env_open(&e, 1);
        uint8_t *a = xalloc(SZ), *b = xalloc(SZ);
        struct ibv_mr *amr = reg(e.pda, a, SZ, LW), *bmr = reg(e.pdb, b, SZ, LW | BIND);
        struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
        uint32_t rkey = bind_ok(&e.b[0], mw, bmr, b + WOFF, WLEN, RR);
        memset(a, 0xa1, SZ);
        memset(b, 0xb2, SZ);
        /* in bounds with the right access: fine */
        CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_READ, a, amr, WLEN, (uintptr_t)b + WOFF, rkey, 1), IBV_WC_SUCCESS);
        check_bytes(a, WLEN, 0xb2, "read through the window");
        memset(a, 0xa1, SZ);
        enum ibv_wc_status st =
            rdma(&e.a[0], cases[c].op, a, amr, cases[c].len, (uintptr_t)b + WOFF + cases[c].off, rkey, 2);
        LOG("%s: %s", cases[c].what, ibv_wc_status_str(st));
        if (st == IBV_WC_SUCCESS && cases[c].op == IBV_WR_RDMA_READ && !sr_object_count) {
            /* kernel rxe checks a window's rkey, QP and access, then the range against the MR, not the window */
            LOG("tolerated on this device: %s inside the MR succeeded", cases[c].what);
        } else {
            expect_access_err(st, cases[c].what);
            check_bytes(a, SZ, 0xa1, "requester memory after the refused access");
            check_bytes(b, SZ, 0xb2, "responder memory after the refused access");
        }
        CHECK_OK(ibv_dealloc_mw(mw));
        env_close(&e);
    }
}

/* LOCAL_INV ends the window; it binds again with a new key; the old key stays dead */
TEST(mw_local_inv, 30) {
    struct env e;
    env_open(&e, 1);
    uint8_t *a = xalloc(SZ), *b = xalloc(SZ);
    struct ibv_mr *amr = reg(e.pda, a, SZ, LW), *bmr = reg(e.pdb, b, SZ, LW | BIND);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    uint32_t k1 = bind_ok(&e.b[0], mw, bmr, b + WOFF, WLEN, RW);
    fill_pattern(a, SZ, 5);
    CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 128, (uintptr_t)b + WOFF, k1, 1), IBV_WC_SUCCESS);
    post_local_inv(e.b[0].qp, 2, k1);
    struct ibv_wc wc = wait_wc(e.b[0].scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_LOCAL_INV, e.b[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    /* free again: a new binding (new key) of another range */
    uint32_t k2 = bind_ok(&e.b[0], mw, bmr, b, WOFF, RW);
    CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 128, (uintptr_t)b, k2, 3), IBV_WC_SUCCESS);
    CHECK(check_pattern(b, 128, 5), "write with the new key");
    memset(b, 0x3c, SZ);
    expect_access_err(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 128, (uintptr_t)b, k1, 4),
                      "write with the invalidated key");
    check_bytes(b, SZ, 0x3c, "memory after the refused write");
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

/*
 * The cycle of a netty-transport-rdma ring slab (docs/PROTOCOL.md §3), many times over one window and one range:
 * bound, written, invalidated; once the LOCAL_INV completed, a write with that key (or any earlier one) fails and
 * places nothing; bound again over the same range under the next key, which works. 300 rounds: the 8-bit key wraps.
 */
TEST(mw_slab_cycle, 60) {
    struct env e;
    env_open(&e, 1);
    uint8_t *a = xalloc(SZ), *b = xalloc(SZ);
    struct ibv_mr *amr = reg(e.pda, a, SZ, LW), *bmr = reg(e.pdb, b, SZ, LW | BIND);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    for (int round = 0; round < 300; round++) {
        uint32_t k = bind_ok(&e.b[0], mw, bmr, b + WOFF, WLEN, RW);
        fill_pattern(a, WLEN, round);
        CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, WLEN, (uintptr_t)b + WOFF, k, 1), IBV_WC_SUCCESS);
        CHECK(check_pattern(b + WOFF, WLEN, round), "round %d: the write through the slab's window", round);
        post_local_inv(e.b[0].qp, 2, k);
        struct ibv_wc wc = wait_wc(e.b[0].scq, TMO);
        check_wc_ok(&wc, 2, IBV_WC_LOCAL_INV, e.b[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    /* every key it ever had is dead while the window is invalid: the last one refused, nothing placed */
    memset(b, 0x3c, SZ);
    expect_access_err(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 64, (uintptr_t)b + WOFF, mw->rkey, 3),
                      "write with the key of the invalidated slab");
    check_bytes(b, SZ, 0x3c, "the held slab after the refused write");
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

static double elapsed_ns(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (t1.tv_sec - t0->tv_sec) * 1e9 + (t1.tv_nsec - t0->tv_nsec);
}

/*
 * What the transport pays per ring slab: one BIND_MW and one LOCAL_INV, posted as it posts them (a chain of 16
 * binds, then a chain of 16 invalidations, each signalled), every completion successful and every slab's key
 * advancing. Logs the cost per bind and per invalidation (the closing notes quote it), one at a time and batched.
 */
TEST(mw_bind_inv_cost, 120) {
    struct env e;
    env_open(&e, 1);
    enum { SLABS = 16, ROUNDS = 2000, SLAB = 1024 };
    uint8_t *b = xalloc(SLABS * SLAB);
    struct ibv_mr *bmr = reg(e.pdb, b, SLABS * SLAB, LW | BIND);
    struct ibv_mw *mw[SLABS];
    for (int k = 0; k < SLABS; k++) mw[k] = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    struct timespec t0;
    /* one slab at a time: bind, wait, invalidate, wait */
    double bind_ns = 0, inv_ns = 0;
    for (int r = 0; r < ROUNDS; r++) {
        clock_gettime(CLOCK_MONOTONIC, &t0);
        bind_ok(&e.b[0], mw[0], bmr, b, SLAB, RW);
        bind_ns += elapsed_ns(&t0);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        post_local_inv(e.b[0].qp, 5, mw[0]->rkey);
        struct ibv_wc wc = wait_wc(e.b[0].scq, TMO);
        check_wc_ok(&wc, 5, IBV_WC_LOCAL_INV, e.b[0].qp->qp_num, WC_ANY_LEN, 0, 0);
        inv_ns += elapsed_ns(&t0);
    }
    /* batched as the transport posts them: SLABS binds in one chain (16 fit the 16-deep send queue), then SLABS
     * invalidations */
    double batch_bind_ns = 0, batch_inv_ns = 0;
    int rounds = ROUNDS / SLABS;
    for (int r = 0; r < rounds; r++) {
        struct ibv_send_wr wr[SLABS], *bad = NULL;
        memset(wr, 0, sizeof wr);
        uint32_t keys[SLABS];
        for (int k = 0; k < SLABS; k++) {
            keys[k] = ibv_inc_rkey(mw[k]->rkey);
            wr[k].wr_id = 100 + k;
            wr[k].opcode = IBV_WR_BIND_MW;
            wr[k].send_flags = IBV_SEND_SIGNALED;
            wr[k].bind_mw.mw = mw[k];
            wr[k].bind_mw.rkey = keys[k];
            wr[k].bind_mw.bind_info.mr = bmr;
            wr[k].bind_mw.bind_info.addr = (uintptr_t)(b + k * SLAB);
            wr[k].bind_mw.bind_info.length = SLAB;
            wr[k].bind_mw.bind_info.mw_access_flags = RW;
            wr[k].next = k + 1 < SLABS ? &wr[k + 1] : NULL;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_OK(ibv_post_send(e.b[0].qp, &wr[0], &bad));
        for (int k = 0; k < SLABS; k++) {
            struct ibv_wc wc = wait_wc(e.b[0].scq, TMO);
            check_wc_ok(&wc, 100 + k, IBV_WC_BIND_MW, e.b[0].qp->qp_num, WC_ANY_LEN, 0, 0);
        }
        batch_bind_ns += elapsed_ns(&t0);
        for (int k = 0; k < SLABS; k++) {
            mw[k]->rkey = keys[k];
            memset(&wr[k], 0, sizeof wr[k]);
            wr[k].wr_id = 200 + k;
            wr[k].opcode = IBV_WR_LOCAL_INV;
            wr[k].send_flags = IBV_SEND_SIGNALED;
            wr[k].invalidate_rkey = keys[k];
            wr[k].next = k + 1 < SLABS ? &wr[k + 1] : NULL;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        CHECK_OK(ibv_post_send(e.b[0].qp, &wr[0], &bad));
        for (int k = 0; k < SLABS; k++) {
            struct ibv_wc wc = wait_wc(e.b[0].scq, TMO);
            check_wc_ok(&wc, 200 + k, IBV_WC_LOCAL_INV, e.b[0].qp->qp_num, WC_ANY_LEN, 0, 0);
        }
        batch_inv_ns += elapsed_ns(&t0);
    }
    /* printed without -v: the per-completion logging of -v would be what it measures */
    fprintf(stderr, "  [mw_bind_inv_cost] per slab: bind %.0f ns, LOCAL_INV %.0f ns one at a time (to its"
            " completion); in chains of %d: bind %.0f ns, LOCAL_INV %.0f ns\n", bind_ns / ROUNDS, inv_ns / ROUNDS, SLABS, batch_bind_ns / (rounds * SLABS),
        batch_inv_ns / (rounds * SLABS));
    for (int k = 0; k < SLABS; k++) CHECK_OK(ibv_dealloc_mw(mw[k]));
    env_close(&e);
}

/*
 * A long write (many packets on a real wire) racing the responder's LOCAL_INV of its window: once the LOCAL_INV
 * completed, the window's bytes never change again, whether the write completed before it or failed after it (a
 * write that lands in part after the invalidation's completion would be a broken fence).
 */
TEST(mw_inv_races_write, 60) {
    struct env e;
    env_open(&e, 1);
    const uint32_t len = 1u << 20;
    uint8_t *a = xalloc(len), *b = xalloc(len), *snap = xalloc(len);
    struct ibv_mr *amr = reg(e.pda, a, len, LW), *bmr = reg(e.pdb, b, len, LW | BIND);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    uint32_t k = bind_ok(&e.b[0], mw, bmr, b, len, RW);
    memset(b, 0x5a, len);
    fill_pattern(a, len, 9);
    post_send(e.a[0].qp, 1, IBV_WR_RDMA_WRITE, a, len, amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)b, k);
    post_local_inv(e.b[0].qp, 2, k);
    struct ibv_wc wc = wait_wc(e.b[0].scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_LOCAL_INV, e.b[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    memcpy(snap, b, len);
    struct ibv_wc w = wait_wc(e.a[0].scq, TMO);
    CHECK(w.wr_id == 1, "the write's completion");
    CHECK(w.status == IBV_WC_SUCCESS || w.status == IBV_WC_REM_ACCESS_ERR, "the write: %s",
          ibv_wc_status_str(w.status));
    usleep(20000);
    CHECK(memcmp(snap, b, len) == 0, "bytes changed after the invalidation completed (the write %s)",
          ibv_wc_status_str(w.status));
    LOG("the write %s against the invalidation", w.status == IBV_WC_SUCCESS ? "completed before" : "failed after");
    if (w.status == IBV_WC_SUCCESS)
        CHECK(check_pattern(b, len, 9), "a write that completed placed all of its bytes");
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

/* SEND_WITH_INV from the peer invalidates the window bound to the receiving QP; the receive CQE says so */
TEST(mw_send_with_inv, 30) {
    struct env e;
    env_open(&e, 1);
    uint8_t *a = xalloc(SZ), *b = xalloc(SZ), *rb = xalloc(4096);
    struct ibv_mr *amr = reg(e.pda, a, SZ, LW), *bmr = reg(e.pdb, b, SZ, LW | BIND), *rmr = reg(e.pdb, rb, 4096, LW);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    uint32_t rkey = bind_ok(&e.b[0], mw, bmr, b + WOFF, WLEN, RW);
    fill_pattern(a, SZ, 11);
    CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 512, (uintptr_t)b + WOFF, rkey, 1), IBV_WC_SUCCESS);
    post_recv(e.b[0].qp, 9, rb, 4096, rmr->lkey);
    struct ibv_sge s = sge(a, 100, amr->lkey);
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 2;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = rkey;
    CHECK_OK(ibv_post_send(e.a[0].qp, &wr, &bad));
    struct ibv_wc wc = wait_wc(e.b[0].rcq, TMO);
    CHECK(wc.status == IBV_WC_SUCCESS, "receive status %s", ibv_wc_status_str(wc.status));
    CHECK_EQ(wc.wr_id, 9);
    CHECK_EQ(wc.opcode, IBV_WC_RECV);
    CHECK_EQ(wc.byte_len, 100);
    CHECK_EQ(wc.qp_num, e.b[0].qp->qp_num);
    check_with_inv(&wc, rkey);
    CHECK(check_pattern(rb, 100, 11), "payload of the SEND_WITH_INV");
    wc = wait_wc(e.a[0].scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_SEND, e.a[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    memset(b, 0x4d, SZ);
    expect_access_err(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 512, (uintptr_t)b + WOFF, rkey, 3),
                      "write through the remotely invalidated window");
    check_bytes(b, SZ, 0x4d, "memory after the refused write");
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

/* a SEND_WITH_INV naming a window bound to another QP (same PD) does not invalidate it: the receive completes
 * in error and the receiving QP goes to ERR (rxe's class J); the window keeps working on its own QP */
TEST(mw_send_with_inv_foreign_window, 30) {
    struct env e;
    env_open(&e, 2);
    uint8_t *a = xalloc(SZ), *b = xalloc(SZ), *rb = xalloc(4096);
    struct ibv_mr *amr = reg(e.pda, a, SZ, LW), *bmr = reg(e.pdb, b, SZ, LW | BIND), *rmr = reg(e.pdb, rb, 4096, LW);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    uint32_t rkey = bind_ok(&e.b[0], mw, bmr, b + WOFF, WLEN, RW);
    post_recv(e.b[1].qp, 9, rb, 4096, rmr->lkey);
    struct ibv_sge s = sge(a, 16, amr->lkey);
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 1;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = rkey;
    CHECK_OK(ibv_post_send(e.a[1].qp, &wr, &bad));
    struct ibv_wc wc = wait_wc(e.b[1].rcq, TMO);
    if (wc.status == IBV_WC_SUCCESS && !sr_object_count) {
        /* rxe_invalidate_mw checks neither the window's QP nor its PD */
        enum ibv_wc_status st = rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 16, (uintptr_t)b + WOFF, rkey, 2);
        CHECK_OK(ibv_dealloc_mw(mw));
        env_close(&e);
        SKIP("this device let a SEND_WITH_INV on another QP invalidate the window (a write through it then: %s)",
             ibv_wc_status_str(st));
    }
    check_wc_err(&wc, 9, IBV_WC_REM_INV_REQ_ERR, e.b[1].qp->qp_num);
    wc = wait_wc(e.a[1].scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_SEND, e.a[1].qp->qp_num, WC_ANY_LEN, 0, 0);
    wait_qp_state(e.b[1].qp, IBV_QPS_ERR, TMO);
    fill_pattern(a, SZ, 13);
    CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 256, (uintptr_t)b + WOFF, rkey, 2), IBV_WC_SUCCESS);
    CHECK(check_pattern(b + WOFF, 256, 13), "the window still works on its own QP");
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

/* bind errors complete with IBV_WC_MW_BIND_ERR and move the QP to ERR */
TEST(mw_bind_errors, 60) {
    struct {
        const char *what;
        int mr_access;
        int64_t off;
        uint64_t len;
        unsigned access;
        int on_a;     /* post the bind on the requester's QP (another PD than the window's) */
        int rebind;   /* bind a window that is bound already */
    } cases[] = {
        {"MR without MW_BIND", LW | RW, WOFF, WLEN, RW, 0, 0},
        {"window beyond the MR", LW | BIND, WOFF, SZ, RW, 0, 0},
        {"window before the MR", LW | BIND, -4096, 8192, RR, 0, 0},
        {"writable window on an MR without LOCAL_WRITE", RR | BIND, WOFF, WLEN, RW, 0, 0},
        {"QP of another PD", LW | BIND, WOFF, WLEN, RW, 1, 0},
        {"type 2 window bound already", LW | BIND, WOFF, WLEN, RW, 0, 1},
    };
    for (unsigned c = 0; c < sizeof cases / sizeof *cases; c++) {
        struct env e;
        env_open(&e, 1);
        uint8_t *b = xalloc(SZ);
        struct ibv_mr *bmr = reg(e.pdb, b, SZ, cases[c].mr_access);
        struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
        struct side *s = cases[c].on_a ? &e.a[0] : &e.b[0];
        if (cases[c].rebind) bind_ok(s, mw, bmr, b, WOFF, RW);
        post_bind(s->qp, 5, mw, bmr, b + cases[c].off, cases[c].len, cases[c].access);
        struct ibv_wc wc = wait_wc(s->scq, TMO);
        LOG("%s: %s", cases[c].what, ibv_wc_status_str(wc.status));
        check_wc_err(&wc, 5, IBV_WC_MW_BIND_ERR, s->qp->qp_num);
        wait_qp_state(s->qp, IBV_QPS_ERR, TMO);
        /* what is posted after it is flushed */
        post_send(s->qp, 6, IBV_WR_SEND, NULL, 0, 0, IBV_SEND_SIGNALED, 0, 0, 0);
        wc = wait_wc(s->scq, TMO);
        check_wc_err(&wc, 6, IBV_WC_WR_FLUSH_ERR, s->qp->qp_num);
        CHECK_OK(ibv_dealloc_mw(mw));
        env_close(&e);
    }
}

/* an MR with a window bound cannot be deregistered; after the window is invalidated it can */
TEST(mw_dereg_mr_with_window, 30) {
    struct env e;
    env_open(&e, 1);
    uint8_t *b = xalloc(SZ);
    struct ibv_mr *bmr = ibv_reg_mr(e.pdb, b, SZ, LW | BIND); /* not remembered: deregistered here */
    CHECK(bmr != NULL, "ibv_reg_mr: %s", strerror(errno));
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_2));
    uint32_t rkey = bind_ok(&e.b[0], mw, bmr, b + WOFF, WLEN, RW);
    int rc = ibv_dereg_mr(bmr);
    LOG("ibv_dereg_mr with a bound window: %d (%s)", rc, strerror(rc));
    CHECK(rc != 0, "ibv_dereg_mr of an MR with a bound window succeeded");
    CHECK(rc == EINVAL || (rc == EBUSY && !sr_object_count), "ibv_dereg_mr: %d (%s), expected EINVAL (IBA 10.6.7.2.6, as rxe)",
          rc, strerror(rc));
    post_local_inv(e.b[0].qp, 1, rkey);
    struct ibv_wc wc = wait_wc(e.b[0].scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_LOCAL_INV, e.b[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK_OK(ibv_dereg_mr(bmr));
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

/* type 1: ibv_bind_mw updates mw->rkey; the window is valid on every QP of its PD; binding nothing unbinds it */
TEST(mw_type1, 30) {
    struct env e;
    env_open(&e, 2);
    uint8_t *a = xalloc(SZ), *b = xalloc(SZ);
    struct ibv_mr *amr = reg(e.pda, a, SZ, LW), *bmr = reg(e.pdb, b, SZ, LW | BIND);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pdb, IBV_MW_TYPE_1));
    uint32_t old = mw->rkey;
    struct ibv_mw_bind mb;
    memset(&mb, 0, sizeof mb);
    mb.wr_id = 1;
    mb.send_flags = IBV_SEND_SIGNALED;
    mb.bind_info.mr = bmr;
    mb.bind_info.addr = (uintptr_t)b + WOFF;
    mb.bind_info.length = WLEN;
    mb.bind_info.mw_access_flags = RW;
    mb.bind_info.mw_access_flags |= IBV_ACCESS_ZERO_BASED;
    CHECK(ibv_bind_mw(e.b[0].qp, mw, &mb) != 0, "zero-based type 1 bind accepted");
    mb.bind_info.mw_access_flags = RW;
    CHECK_OK(ibv_bind_mw(e.b[0].qp, mw, &mb));
    CHECK(mw->rkey != old && (mw->rkey & ~0xffu) == (old & ~0xffu), "rkey 0x%x after bind (was 0x%x)", mw->rkey, old);
    struct ibv_wc wc = wait_wc(e.b[0].scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_BIND_MW, e.b[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    fill_pattern(a, SZ, 17);
    CHECK_EQ(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 64, (uintptr_t)b + WOFF, mw->rkey, 2), IBV_WC_SUCCESS);
    CHECK_EQ(rdma(&e.a[1], IBV_WR_RDMA_WRITE, a, amr, 64, (uintptr_t)b + WOFF + 64, mw->rkey, 3), IBV_WC_SUCCESS);
    CHECK(check_pattern(b + WOFF, 64, 17) && check_pattern(b + WOFF + 64, 64, 17), "type 1 window on both QPs");
    if (sr_object_count) {
        /* rdma-core's rxe provider reads bind_info.mr->lkey even when unbinding: not run there */
        memset(&mb.bind_info, 0, sizeof mb.bind_info);
        mb.wr_id = 4;
        CHECK_OK(ibv_bind_mw(e.b[1].qp, mw, &mb));
        wc = wait_wc(e.b[1].scq, TMO);
        check_wc_ok(&wc, 4, IBV_WC_BIND_MW, e.b[1].qp->qp_num, WC_ANY_LEN, 0, 0);
        memset(b, 0x6e, SZ);
        expect_access_err(rdma(&e.a[0], IBV_WR_RDMA_WRITE, a, amr, 64, (uintptr_t)b + WOFF, mw->rkey, 5),
                          "write through an unbound type 1 window");
        check_bytes(b, SZ, 0x6e, "memory after the refused write");
    }
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

/* a bind posted behind an outstanding RDMA READ completes after it, in order; unsignalled binds give no CQE */
TEST(mw_bind_in_order, 30) {
    struct env e;
    env_open(&e, 1);
    uint8_t *a = xalloc(SZ), *b = xalloc(SZ), *c = xalloc(SZ);
    struct ibv_mr *amr = reg(e.pda, a, SZ, LW | BIND), *bmr = reg(e.pdb, b, SZ, LW | RR), *cmr = reg(e.pda, c, SZ, LW);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pda, IBV_MW_TYPE_2));
    memset(b, 0x21, SZ);
    /* READ 16 KiB (signalled), BIND (unsignalled), LOCAL_INV (signalled): the CQEs come READ, LOCAL_INV */
    post_send(e.a[0].qp, 1, IBV_WR_RDMA_READ, c, SZ, cmr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)b, bmr->rkey);
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 2;
    wr.opcode = IBV_WR_BIND_MW;
    wr.bind_mw.mw = mw;
    wr.bind_mw.rkey = ibv_inc_rkey(mw->rkey);
    wr.bind_mw.bind_info.mr = amr;
    wr.bind_mw.bind_info.addr = (uintptr_t)a;
    wr.bind_mw.bind_info.length = SZ;
    wr.bind_mw.bind_info.mw_access_flags = RW;
    CHECK_OK(ibv_post_send(e.a[0].qp, &wr, &bad)); /* unsignalled */
    mw->rkey = wr.bind_mw.rkey;
    post_local_inv(e.a[0].qp, 3, mw->rkey);
    struct ibv_wc wc = wait_wc(e.a[0].scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RDMA_READ, e.a[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    check_bytes(c, SZ, 0x21, "data read");
    wc = wait_wc(e.a[0].scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_LOCAL_INV, e.a[0].qp->qp_num, WC_ANY_LEN, 0, 0);
    expect_no_wc(e.a[0].scq, 50);
    CHECK_OK(ibv_dealloc_mw(mw));
    env_close(&e);
}

/* ---- across two processes: the window over the wire ------------------------------------------------------ */
struct winfo {
    uint64_t addr;
    uint32_t rkey;
};

static void pipe_write(int fd, const void *p, size_t n) {
    if (write(fd, p, n) != (ssize_t)n) FAIL("pipe write: %s", strerror(errno));
}

static void pipe_read(int fd, void *p, size_t n, int timeout_ms) {
    size_t got = 0;
    while (got < n) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, timeout_ms) <= 0) FAIL("peer process did not answer within %d ms", timeout_ms);
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0) FAIL("peer process closed the pipe (it failed or died)");
        got += (size_t)r;
    }
}

/* the responder process: binds a window on its QP and SENDs its rkey in the same post (the bind comes first);
 * the peer writes through it and invalidates it with SEND_WITH_INV */
static void wserver(int wfd) {
    sr_current = "mw server";
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(ec, &listen);
    pipe_write(wfd, &port, sizeof port);
    struct rdma_cm_event *ev = cm_expect(ec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO * 2);
    struct rdma_cm_id *sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    struct qp_opts o;
    qp_opts_default(&o);
    struct ep e;
    memset(&e, 0, sizeof e);
    cm_ep_setup(&e, sid, ec, &o);
    uint8_t *region = xalloc(SZ), *rbuf = xalloc(4096), *sbuf = xalloc(4096);
    memset(region, 0x77, SZ);
    struct ibv_mr *mr = reg(e.pd, region, SZ, LW | BIND), *rmr = reg(e.pd, rbuf, 4096, LW),
                  *smr = reg(e.pd, sbuf, 4096, LW);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(e.pd, IBV_MW_TYPE_2));
    post_recv(e.qp, 1, rbuf, 4096, rmr->lkey);
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    CHECK_OK(rdma_accept(sid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    struct winfo wi = {(uintptr_t)region + WOFF, ibv_inc_rkey(mw->rkey)};
    memcpy(sbuf, &wi, sizeof wi);
    struct ibv_sge s = sge(sbuf, sizeof wi, smr->lkey);
    struct ibv_send_wr bind, send, *bad = NULL;
    memset(&bind, 0, sizeof bind);
    bind.wr_id = 10;
    bind.opcode = IBV_WR_BIND_MW;
    bind.next = &send;
    bind.bind_mw.mw = mw;
    bind.bind_mw.rkey = wi.rkey;
    bind.bind_mw.bind_info.mr = mr;
    bind.bind_mw.bind_info.addr = wi.addr;
    bind.bind_mw.bind_info.length = WLEN;
    bind.bind_mw.bind_info.mw_access_flags = RW;
    memset(&send, 0, sizeof send);
    send.wr_id = 11;
    send.opcode = IBV_WR_SEND;
    send.send_flags = IBV_SEND_SIGNALED;
    send.sg_list = &s;
    send.num_sge = 1;
    CHECK_OK(ibv_post_send(e.qp, &bind, &bad)); /* unsignalled bind, then the SEND carrying its rkey */
    mw->rkey = wi.rkey;
    struct ibv_wc wc = wait_wc(e.scq, TMO);
    check_wc_ok(&wc, 11, IBV_WC_SEND, e.qp->qp_num, WC_ANY_LEN, 0, 0);
    /* only now may the peer make this QP fail (its refused write): a SEND whose ACK was not yet taken would be
     * flushed (seen on kernel rxe under emulation, the ACK late) */
    uint8_t sent = 1;
    pipe_write(wfd, &sent, sizeof sent);
    wc = wait_wc(e.rcq, TMO * 2);
    CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV && wc.wr_id == 1, "receive: %s opcode %d",
          ibv_wc_status_str(wc.status), wc.opcode);
    check_with_inv(&wc, wi.rkey);
    /* the peer now writes once more (refused) and disconnects */
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_DISCONNECTED, TMO * 2)));
    CHECK(check_pattern(region + WOFF, 4096, 21), "data written through the window");
    check_bytes(region, WOFF, 0x77, "before the window");
    check_bytes(region + WOFF + 4096, SZ - WOFF - 4096, 0x77, "after the first write (the refused one)");
    rdma_disconnect(sid);
    CHECK_OK(ibv_dealloc_mw(mw));
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(sid));
    CHECK_OK(rdma_destroy_id(listen));
    rdma_destroy_event_channel(ec);
}

TEST(mw_xproc, 60) {
    int pfd[2];
    CHECK_OK(pipe(pfd));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        close(pfd[0]);
        alarm(50);
        wserver(pfd[1]);
        sr_leak_check();
        _exit(0);
    }
    close(pfd[1]);
    uint16_t port;
    pipe_read(pfd[0], &port, sizeof port, TMO * 2);
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *cid = cm_resolve(ec, test_addr(), port);
    struct qp_opts o;
    qp_opts_default(&o);
    struct ep e;
    memset(&e, 0, sizeof e);
    cm_ep_setup(&e, cid, ec, &o);
    uint8_t *buf = xalloc(SZ);
    struct ibv_mr *mr = reg(e.pd, buf, SZ, LW);
    post_recv(e.qp, 1, buf + SZ - 4096, 4096, mr->lkey);
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    CHECK_OK(rdma_connect(cid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    struct ibv_wc wc = wait_wc(e.rcq, TMO * 2);
    check_wc_ok(&wc, 1, IBV_WC_RECV, e.qp->qp_num, sizeof(struct winfo), 0, 0);
    struct winfo wi;
    memcpy(&wi, buf + SZ - 4096, sizeof wi);
    fill_pattern(buf, 4096, 21);
    struct side a = {e.qp, e.scq, e.rcq};
    CHECK_EQ(rdma(&a, IBV_WR_RDMA_WRITE, buf, mr, 4096, wi.addr, wi.rkey, 2), IBV_WC_SUCCESS);
    struct ibv_sge s = sge(buf, 8, mr->lkey);
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 3;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND_WITH_INV;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.invalidate_rkey = wi.rkey;
    CHECK_OK(ibv_post_send(e.qp, &wr, &bad));
    wc = wait_wc(e.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_SEND, e.qp->qp_num, WC_ANY_LEN, 0, 0);
    uint8_t sent;
    pipe_read(pfd[0], &sent, sizeof sent, TMO * 2); /* the server took its SEND's completion */
    expect_access_err(rdma(&a, IBV_WR_RDMA_WRITE, buf, mr, 4096, wi.addr + 4096, wi.rkey, 4),
                      "write through the invalidated window from another process");
    CHECK_OK(rdma_disconnect(cid));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(cid));
    rdma_destroy_event_channel(ec);
    double end = now_ms() + 20000;
    int st;
    while (waitpid(pid, &st, WNOHANG) != pid) {
        if (now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            FAIL("server process did not finish");
        }
        msleep(5);
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "server process failed (status 0x%x)", st);
}
