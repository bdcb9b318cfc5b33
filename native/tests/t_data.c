/* 2. data path: every opcode, CQE fields, SGEs, inline, signalling, ordering, chains.
 * Each test runs over a QP pair connected by plain verbs and by rdma_cm. */
#include "common.h"

#define ALL_ACCESS (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define BUFSZ (1u << 20)
#define TMO 5000

struct bufs {
    uint8_t *a, *b;
    struct ibv_mr *amr, *bmr;
};

static void bufs_open(struct pair *p, struct bufs *x) {
    x->a = xalloc(BUFSZ);
    x->b = xalloc(BUFSZ);
    x->amr = reg(p->a.pd, x->a, BUFSZ, ALL_ACCESS);
    x->bmr = reg(p->b.pd, x->b, BUFSZ, ALL_ACCESS);
}

static void bufs_close(struct bufs *x) {
    dereg(x->amr);
    dereg(x->bmr);
}

static void send_one_way(struct ep *s, struct ep *r, uint8_t *sbuf, struct ibv_mr *smr, uint8_t *rbuf, struct ibv_mr *rmr,
                         uint32_t len, int with_imm, uint32_t seed) {
    uint32_t imm = htonl(0x11223344u + seed);
    memset(rbuf, 0, len + 64);
    post_recv(r->qp, 500 + seed, rbuf, len + 64, rmr->lkey);
    fill_pattern(sbuf, len, seed);
    post_send(s->qp, 700 + seed, with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, sbuf, len, smr->lkey, IBV_SEND_SIGNALED,
              imm, 0, 0);
    struct ibv_wc wc = wait_wc(s->scq, TMO);
    check_wc_ok(&wc, 700 + seed, IBV_WC_SEND, s->qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(r->rcq, TMO);
    check_wc_ok(&wc, 500 + seed, IBV_WC_RECV, r->qp->qp_num, len, with_imm, imm);
    CHECK(check_pattern(rbuf, len, seed), "received bytes differ from sent (len %u)", len);
    for (int i = 0; i < 64; i++) CHECK(rbuf[len + i] == 0, "byte %u beyond the message was written", len + i);
    expect_no_wc(s->scq, 1);
    expect_no_wc(r->rcq, 1);
}

TEST_BOTH(send_recv, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    send_one_way(&p.a, &p.b, x.a, x.amr, x.b, x.bmr, 1000, 0, 1);
    send_one_way(&p.b, &p.a, x.b, x.bmr, x.a, x.amr, 777, 0, 2); /* other direction */
    send_one_way(&p.a, &p.b, x.a, x.amr, x.b, x.bmr, 1, 0, 3);
    send_one_way(&p.a, &p.b, x.a, x.amr, x.b, x.bmr, 4096 * 3 + 5, 0, 4); /* multi-packet */
    send_one_way(&p.a, &p.b, x.a, x.amr, x.b, x.bmr, 512 * 1024, 0, 5);
    bufs_close(&x);
    pair_close(&p);
}

/* Payloads whose destination lies a few bytes after the source modulo 4 KiB (the device copies those in pieces,
 * sr_copy): every byte lands, none beyond. */
TEST_BOTH(send_misaligned, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    static const uint32_t offsets[][2] = {{0, 8}, {0, 63}, {8, 16}, {100, 101}, {4090, 4}};
    static const uint32_t lens[] = {2049, 2113, 4096, 65536 + 5, 512 * 1024};
    uint32_t seed = 10;
    for (unsigned o = 0; o < sizeof(offsets) / sizeof(offsets[0]); o++) {
        for (unsigned l = 0; l < sizeof(lens) / sizeof(lens[0]); l++) {
            send_one_way(&p.a, &p.b, x.a + offsets[o][0], x.amr, x.b + offsets[o][1], x.bmr, lens[l], 0, seed++);
        }
    }
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(send_with_imm, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    send_one_way(&p.a, &p.b, x.a, x.amr, x.b, x.bmr, 100, 1, 1);
    send_one_way(&p.b, &p.a, x.b, x.bmr, x.a, x.amr, 9000, 1, 2);
    /* imm 0x01020304: raw bytes on the receiver must equal what was posted */
    post_recv(p.b.qp, 1, x.b, 64, x.bmr->lkey);
    post_send(p.a.qp, 2, IBV_WR_SEND_WITH_IMM, x.a, 8, x.amr->lkey, IBV_SEND_SIGNALED, htonl(0x01020304), 0, 0);
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.b.qp->qp_num, 8, 1, htonl(0x01020304));
    CHECK(((uint8_t *)&wc.imm_data)[0] == 1 && ((uint8_t *)&wc.imm_data)[3] == 4, "imm_data bytes in network order");
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(zero_length_send, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    memset(x.b, 0x5a, 64);
    post_recv(p.b.qp, 11, x.b, 64, x.bmr->lkey);
    post_send(p.a.qp, 12, IBV_WR_SEND, NULL, 0, 0, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 12, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 11, IBV_WC_RECV, p.b.qp->qp_num, 0, 0, 0);
    for (int i = 0; i < 64; i++) CHECK(x.b[i] == 0x5a, "zero-length SEND wrote into the buffer");
    /* zero-length SEND_WITH_IMM with an empty receive WR */
    struct ibv_recv_wr rwr = {.wr_id = 13, .sg_list = NULL, .num_sge = 0}, *rbad;
    CHECK_OK(ibv_post_recv(p.b.qp, &rwr, &rbad));
    post_send(p.a.qp, 14, IBV_WR_SEND_WITH_IMM, NULL, 0, 0, IBV_SEND_SIGNALED, htonl(77), 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 13, IBV_WC_RECV, p.b.qp->qp_num, 0, 1, htonl(77));
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 14, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(rdma_write, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    post_recv(p.b.qp, 1, x.b + BUFSZ / 2, 64, x.bmr->lkey); /* must NOT be consumed by a plain WRITE */
    uint32_t lens[] = {1, 64, 4095, 4096, 65536, 300000};
    uint32_t off = 0;
    for (unsigned i = 0; i < sizeof lens / sizeof *lens; i++) {
        fill_pattern(x.a + off, lens[i], 10 + i);
        post_send(p.a.qp, 20 + i, IBV_WR_RDMA_WRITE, x.a + off, lens[i], x.amr->lkey, IBV_SEND_SIGNALED, 0,
                  (uintptr_t)(x.b + off + 3), x.bmr->rkey);
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 20 + i, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
        CHECK(check_pattern(x.b + off + 3, lens[i], 10 + i), "written bytes differ (len %u)", lens[i]);
        CHECK(x.b[off + 2] == 0 && x.b[off + 3 + lens[i]] == 0, "bytes around the target written");
        off += lens[i] + 8;
    }
    /* zero-length write */
    post_send(p.a.qp, 40, IBV_WR_RDMA_WRITE, NULL, 0, 0, IBV_SEND_SIGNALED, 0, (uintptr_t)x.b, x.bmr->rkey);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 40, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    expect_no_wc(p.b.rcq, 50);
    /* the receive is still there for a SEND */
    post_send(p.a.qp, 41, IBV_WR_SEND, x.a, 10, x.amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.b.qp->qp_num, 10, 0, 0);
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 41, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(rdma_write_with_imm, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    uint32_t lens[] = {0, 1, 5000, 200000};
    for (unsigned i = 0; i < 4; i++) {
        uint32_t imm = htonl(0xA0B0C0D0u + i);
        uint8_t *rb = x.b + BUFSZ - 128;
        memset(rb, 0x77, 128);
        post_recv(p.b.qp, 30 + i, rb, 128, x.bmr->lkey);
        fill_pattern(x.a, lens[i], 40 + i);
        memset(x.b + 1000, 0, lens[i] + 1);
        post_send(p.a.qp, 50 + i, IBV_WR_RDMA_WRITE_WITH_IMM, lens[i] ? x.a : NULL, lens[i], x.amr->lkey,
                  IBV_SEND_SIGNALED, imm, (uintptr_t)(x.b + 1000), x.bmr->rkey);
        struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 30 + i, IBV_WC_RECV_RDMA_WITH_IMM, p.b.qp->qp_num, lens[i], 1, imm);
        CHECK(check_pattern(x.b + 1000, lens[i], 40 + i), "written bytes differ (len %u)", lens[i]);
        CHECK(x.b[1000 + lens[i]] == 0, "byte after the written range");
        for (int j = 0; j < 128; j++) CHECK(rb[j] == 0x77, "WRITE_WITH_IMM wrote into the receive buffer");
        wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 50 + i, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    /* a receive WR without any SGE is enough for WRITE_WITH_IMM */
    struct ibv_recv_wr rwr = {.wr_id = 60, .sg_list = NULL, .num_sge = 0}, *rbad;
    CHECK_OK(ibv_post_recv(p.b.qp, &rwr, &rbad));
    fill_pattern(x.a, 3000, 61);
    post_send(p.a.qp, 61, IBV_WR_RDMA_WRITE_WITH_IMM, x.a, 3000, x.amr->lkey, IBV_SEND_SIGNALED, htonl(61),
              (uintptr_t)x.b, x.bmr->rkey);
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 60, IBV_WC_RECV_RDMA_WITH_IMM, p.b.qp->qp_num, 3000, 1, htonl(61));
    CHECK(check_pattern(x.b, 3000, 61), "data");
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 61, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(rdma_read, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    uint32_t lens[] = {1, 100, 4096, 70000, 500000};
    for (unsigned i = 0; i < 5; i++) {
        fill_pattern(x.b + 17, lens[i], 80 + i);
        memset(x.a, 0, lens[i] + 16);
        post_send(p.a.qp, 90 + i, IBV_WR_RDMA_READ, x.a + 8, lens[i], x.amr->lkey, IBV_SEND_SIGNALED, 0,
                  (uintptr_t)(x.b + 17), x.bmr->rkey);
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 90 + i, IBV_WC_RDMA_READ, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
        CHECK(check_pattern(x.a + 8, lens[i], 80 + i), "read bytes differ (len %u)", lens[i]);
        CHECK(x.a[7] == 0 && x.a[8 + lens[i]] == 0, "bytes around the local target written");
    }
    expect_no_wc(p.b.rcq, 20);
    /* several reads outstanding at once */
    for (int i = 0; i < 8; i++) {
        fill_pattern(x.b + i * 8192, 8192, 200 + i);
        post_send(p.a.qp, 300 + i, IBV_WR_RDMA_READ, x.a + BUFSZ / 2 + i * 8192, 8192, x.amr->lkey, IBV_SEND_SIGNALED,
                  0, (uintptr_t)(x.b + i * 8192), x.bmr->rkey);
    }
    for (int i = 0; i < 8; i++) {
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 300 + i, IBV_WC_RDMA_READ, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
        CHECK(check_pattern(x.a + BUFSZ / 2 + i * 8192, 8192, 200 + i), "read %d", i);
    }
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(atomics, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct ibv_device_attr da;
    CHECK_OK(ibv_query_device(p.a.ctx, &da));
    if (da.atomic_cap == IBV_ATOMIC_NONE) {
        pair_close(&p);
        SKIP("device reports atomic_cap IBV_ATOMIC_NONE");
    }
    struct bufs x;
    bufs_open(&p, &x);
    uint64_t *target = (uint64_t *)(x.b + 64), *res = (uint64_t *)(x.a + 128);
    *target = 1000;
    struct ibv_sge s = sge(res, 8, x.amr->lkey);
    struct ibv_send_wr wr, *bad;
    /* FETCH_AND_ADD */
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 1;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.atomic.remote_addr = (uintptr_t)target;
    wr.wr.atomic.rkey = x.bmr->rkey;
    wr.wr.atomic.compare_add = 5;
    CHECK_OK(ibv_post_send(p.a.qp, &wr, &bad));
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_FETCH_ADD, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK_EQ(*res, 1000);
    CHECK_EQ(*target, 1005);
    /* CMP_AND_SWP, matching */
    wr.wr_id = 2;
    wr.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
    wr.wr.atomic.compare_add = 1005;
    wr.wr.atomic.swap = 0x1122334455667788ull;
    CHECK_OK(ibv_post_send(p.a.qp, &wr, &bad));
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_COMP_SWAP, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK_EQ(*res, 1005);
    CHECK(*target == 0x1122334455667788ull, "swap stored 0x%llx", (unsigned long long)*target);
    /* CMP_AND_SWP, not matching: unchanged, original returned */
    wr.wr_id = 3;
    wr.wr.atomic.compare_add = 1;
    wr.wr.atomic.swap = 2;
    CHECK_OK(ibv_post_send(p.a.qp, &wr, &bad));
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_COMP_SWAP, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(*res == 0x1122334455667788ull, "returned 0x%llx", (unsigned long long)*res);
    CHECK(*target == 0x1122334455667788ull, "unchanged");
    /* 100 fetch-adds in flight */
    *target = 0;
    for (int i = 0; i < 50; i++) {
        wr.wr_id = 100 + i;
        wr.opcode = IBV_WR_ATOMIC_FETCH_AND_ADD;
        wr.wr.atomic.compare_add = 3;
        s.addr = (uintptr_t)(x.a + 4096 + i * 8);
        CHECK_OK(ibv_post_send(p.a.qp, &wr, &bad));
    }
    for (int i = 0; i < 50; i++) {
        wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 100 + i, IBV_WC_FETCH_ADD, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
        CHECK_EQ(((uint64_t *)(x.a + 4096))[i], 3 * i);
    }
    CHECK_EQ(*target, 150);
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(multi_sge, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    /* second MR on each side so the SGEs use different lkeys */
    uint8_t *a2 = xalloc(65536), *b2 = xalloc(65536);
    struct ibv_mr *a2mr = reg(p.a.pd, a2, 65536, ALL_ACCESS), *b2mr = reg(p.b.pd, b2, 65536, ALL_ACCESS);
    uint8_t *src = xalloc(20000);
    fill_pattern(src, 20000, 99);
    /* gather: 3 pieces */
    memcpy(x.a + 100, src, 7);
    memcpy(a2 + 50, src + 7, 12000);
    memcpy(x.a + 30000, src + 12007, 7993);
    struct ibv_sge gs[3] = {sge(x.a + 100, 7, x.amr->lkey), sge(a2 + 50, 12000, a2mr->lkey),
                            sge(x.a + 30000, 7993, x.amr->lkey)};
    /* scatter: 4 pieces of different sizes, total capacity 20100 */
    struct ibv_sge ss[4] = {sge(b2 + 1, 3000, b2mr->lkey), sge(x.b + 5, 1, x.bmr->lkey),
                            sge(x.b + 40000, 9999, x.bmr->lkey), sge(b2 + 20000, 7100, b2mr->lkey)};
    struct ibv_recv_wr rwr = {.wr_id = 1, .sg_list = ss, .num_sge = 4}, *rbad;
    CHECK_OK(ibv_post_recv(p.b.qp, &rwr, &rbad));
    struct ibv_send_wr swr, *sbad;
    memset(&swr, 0, sizeof swr);
    swr.wr_id = 2;
    swr.sg_list = gs;
    swr.num_sge = 3;
    swr.opcode = IBV_WR_SEND;
    swr.send_flags = IBV_SEND_SIGNALED;
    CHECK_OK(ibv_post_send(p.a.qp, &swr, &sbad));
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.b.qp->qp_num, 20000, 0, 0);
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    uint8_t *got = xalloc(20000);
    memcpy(got, b2 + 1, 3000);
    memcpy(got + 3000, x.b + 5, 1);
    memcpy(got + 3001, x.b + 40000, 9999);
    memcpy(got + 13000, b2 + 20000, 7000);
    CHECK(!memcmp(got, src, 20000), "scattered data differs");
    CHECK(b2[20000 + 7000] == 0, "scatter wrote past the message");
    /* gather WRITE and scatter READ */
    memset(x.b, 0, 30000);
    swr.wr_id = 3;
    swr.opcode = IBV_WR_RDMA_WRITE;
    swr.wr.rdma.remote_addr = (uintptr_t)(x.b + 10);
    swr.wr.rdma.rkey = x.bmr->rkey;
    CHECK_OK(ibv_post_send(p.a.qp, &swr, &sbad));
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(!memcmp(x.b + 10, src, 20000), "gathered WRITE data differs");
    struct ibv_sge rs[2] = {sge(a2 + 1000, 5000, a2mr->lkey), sge(x.a + 200000, 15000, x.amr->lkey)};
    swr.wr_id = 4;
    swr.sg_list = rs;
    swr.num_sge = 2;
    swr.opcode = IBV_WR_RDMA_READ;
    CHECK_OK(ibv_post_send(p.a.qp, &swr, &sbad));
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 4, IBV_WC_RDMA_READ, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(!memcmp(a2 + 1000, src, 5000) && !memcmp(x.a + 200000, src + 5000, 15000), "scattered READ data differs");
    dereg(a2mr);
    dereg(b2mr);
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(inline_send, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    if (p.a.max_inline < 16) {
        pair_close(&p);
        SKIP("max_inline_data %u", p.a.max_inline);
    }
    struct bufs x;
    bufs_open(&p, &x);
    uint32_t len = p.a.max_inline < 64 ? p.a.max_inline : 64;
    uint8_t stackbuf[64]; /* not registered: inline data needs no lkey */
    for (int round = 0; round < 3; round++) {
        post_recv(p.b.qp, 10 + round, x.b, 4096, x.bmr->lkey);
        fill_pattern(stackbuf, len, 300 + round);
        post_send(p.a.qp, 20 + round, round == 2 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, stackbuf, len, 0xdeadbeef,
                  IBV_SEND_INLINE | IBV_SEND_SIGNALED, htonl(5), 0, 0);
        memset(stackbuf, 0xEE, sizeof stackbuf); /* reuse immediately after post */
        struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 10 + round, IBV_WC_RECV, p.b.qp->qp_num, len, round == 2, htonl(5));
        CHECK(check_pattern(x.b, len, 300 + round), "inline data differs (buffer reused after post)");
        wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 20 + round, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    /* inline RDMA_WRITE with two SGEs */
    uint8_t s1[10], s2[20];
    fill_pattern(s1, 10, 1);
    fill_pattern(s2, 20, 2);
    struct ibv_sge gs[2] = {sge(s1, 10, 0), sge(s2, 20, 0)};
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 30;
    wr.sg_list = gs;
    wr.num_sge = 2;
    wr.opcode = IBV_WR_RDMA_WRITE;
    wr.send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
    wr.wr.rdma.remote_addr = (uintptr_t)(x.b + 5000);
    wr.wr.rdma.rkey = x.bmr->rkey;
    CHECK_OK(ibv_post_send(p.a.qp, &wr, &bad));
    memset(s1, 0, 10);
    memset(s2, 0, 20);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 30, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(check_pattern(x.b + 5000, 10, 1) && check_pattern(x.b + 5010, 20, 2), "inline write data");
    /* more than max_inline_data inline is refused at post time */
    uint8_t *big = xalloc(p.a.max_inline + 1);
    struct ibv_sge bs = sge(big, p.a.max_inline + 1, 0);
    wr.wr_id = 31;
    wr.sg_list = &bs;
    wr.num_sge = 1;
    bad = NULL;
    CHECK(ibv_post_send(p.a.qp, &wr, &bad) != 0, "inline of max_inline_data+1 bytes must fail");
    CHECK(bad == &wr, "bad_wr");
    expect_no_wc(p.a.scq, 20);
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(unsignalled, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    for (int i = 0; i < 10; i++) post_recv(p.b.qp, 100 + i, x.b + i * 256, 256, x.bmr->lkey);
    for (int i = 0; i < 10; i++) {
        fill_pattern(x.a + i * 256, 200, i);
        post_send(p.a.qp, 200 + i, IBV_WR_SEND, x.a + i * 256, 200, x.amr->lkey, i == 9 ? IBV_SEND_SIGNALED : 0, 0, 0, 0);
    }
    for (int i = 0; i < 10; i++) {
        struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 100 + i, IBV_WC_RECV, p.b.qp->qp_num, 200, 0, 0);
        CHECK(check_pattern(x.b + i * 256, 200, i), "data %d", i);
    }
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 209, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    expect_no_wc(p.a.scq, 100);
    /* many rounds of unsignalled WRITEs: the SQ slots are reclaimed by the signalled one */
    for (int round = 0; round < 20; round++) {
        for (int i = 0; i < 16; i++)
            post_send(p.a.qp, 1000 + round * 16 + i, IBV_WR_RDMA_WRITE, x.a, 512, x.amr->lkey,
                      i == 15 ? IBV_SEND_SIGNALED : 0, 0, (uintptr_t)(x.b + 8192), x.bmr->rkey);
        wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 1000 + round * 16 + 15, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    expect_no_wc(p.a.scq, 50);
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(sq_sig_all, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.sq_sig_all = 1;
    struct pair p;
    pair_open(&p, kind, &o);
    struct bufs x;
    bufs_open(&p, &x);
    for (int i = 0; i < 5; i++) post_recv(p.b.qp, 100 + i, x.b + i * 256, 256, x.bmr->lkey);
    for (int i = 0; i < 5; i++) post_send(p.a.qp, 200 + i, IBV_WR_SEND, x.a, 100, x.amr->lkey, 0, 0, 0, 0);
    post_send(p.a.qp, 300, IBV_WR_RDMA_WRITE, x.a, 100, x.amr->lkey, 0, 0, (uintptr_t)x.b + 9000, x.bmr->rkey);
    for (int i = 0; i < 5; i++) {
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 200 + i, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 300, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    for (int i = 0; i < 5; i++) {
        wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 100 + i, IBV_WC_RECV, p.b.qp->qp_num, 100, 0, 0);
    }
    struct ibv_qp_init_attr ia;
    struct ibv_qp_attr qa;
    CHECK_OK(ibv_query_qp(p.a.qp, &qa, IBV_QP_CAP, &ia));
    CHECK_EQ(ia.sq_sig_all, 1);
    bufs_close(&x);
    pair_close(&p);
}

/* 2000 messages, mixed sizes, in batches of the SQ depth: completions in post order on both sides,
 * data in order; a WRITE followed by a SEND is visible when the SEND arrives. */
TEST_BOTH(ordering, 60) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    const int N = 2000, B = 32;
    int next_recv = 0, recvd = 0, sent = 0, sdone = 0;
    for (; next_recv < 64; next_recv++)
        post_recv(p.b.qp, next_recv, x.b + (next_recv % 64) * 4096, 4096, x.bmr->lkey);
    while (recvd < N) {
        while (sent < N && sent - sdone < B) {
            uint32_t len = 1 + (sent * 37) % 3000;
            uint8_t *s = x.a + (sent % B) * 4096;
            fill_pattern(s, len, 1000 + sent);
            post_send(p.a.qp, sent, IBV_WR_SEND, s, len, x.amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
            sent++;
        }
        struct ibv_wc wc;
        int n;
        while ((n = ibv_poll_cq(p.a.scq, 1, &wc)) == 1) {
            check_wc_ok(&wc, sdone, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
            sdone++;
        }
        CHECK(n == 0, "poll_cq %d", n);
        while ((n = ibv_poll_cq(p.b.rcq, 1, &wc)) == 1) {
            uint32_t len = 1 + (recvd * 37) % 3000;
            check_wc_ok(&wc, recvd, IBV_WC_RECV, p.b.qp->qp_num, len, 0, 0);
            CHECK(check_pattern(x.b + (recvd % 64) * 4096, len, 1000 + recvd), "message %d data", recvd);
            recvd++;
            if (next_recv < N) {
                post_recv(p.b.qp, next_recv, x.b + (next_recv % 64) * 4096, 4096, x.bmr->lkey);
                next_recv++;
            }
        }
        CHECK(n == 0, "poll_cq %d", n);
    }
    while (sdone < N) {
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, sdone, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
        sdone++;
    }
    /* WRITE (large, unsignalled) then SEND: the SEND's arrival implies the WRITE data is in place */
    for (int r = 0; r < 20; r++) {
        post_recv(p.b.qp, 5000 + r, x.b + BUFSZ - 4096, 4096, x.bmr->lkey);
        fill_pattern(x.a + 65536, 256 * 1024, 7000 + r);
        post_send(p.a.qp, 6000 + r, IBV_WR_RDMA_WRITE, x.a + 65536, 256 * 1024, x.amr->lkey, 0, 0,
                  (uintptr_t)(x.b + 65536), x.bmr->rkey);
        post_send(p.a.qp, 7000 + r, IBV_WR_SEND, x.a, 4, x.amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
        struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 5000 + r, IBV_WC_RECV, p.b.qp->qp_num, 4, 0, 0);
        CHECK(check_pattern(x.b + 65536, 256 * 1024, 7000 + r), "WRITE data not complete when the following SEND arrived");
        wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 7000 + r, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    /* mixed opcodes complete in post order */
    post_recv(p.b.qp, 8000, x.b, 4096, x.bmr->lkey);
    post_recv(p.b.qp, 8001, x.b + 4096, 4096, x.bmr->lkey);
    post_send(p.a.qp, 1, IBV_WR_RDMA_READ, x.a + 4096, 70000, x.amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)(x.b + 100000), x.bmr->rkey);
    post_send(p.a.qp, 2, IBV_WR_SEND, x.a, 10, x.amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    post_send(p.a.qp, 3, IBV_WR_RDMA_WRITE, x.a, 10, x.amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)(x.b + 20000), x.bmr->rkey);
    post_send(p.a.qp, 4, IBV_WR_RDMA_WRITE_WITH_IMM, x.a, 10, x.amr->lkey, IBV_SEND_SIGNALED, htonl(4), (uintptr_t)(x.b + 20000), x.bmr->rkey);
    post_send(p.a.qp, 5, IBV_WR_RDMA_READ, x.a + 4096, 10, x.amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)(x.b + 100000), x.bmr->rkey);
    enum ibv_wc_opcode ops[] = {IBV_WC_RDMA_READ, IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_WRITE, IBV_WC_RDMA_READ};
    for (int i = 0; i < 5; i++) {
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, i + 1, ops[i], p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 8000, IBV_WC_RECV, p.b.qp->qp_num, 10, 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 8001, IBV_WC_RECV_RDMA_WITH_IMM, p.b.qp->qp_num, 10, 1, htonl(4));
    bufs_close(&x);
    pair_close(&p);
}

TEST_BOTH(chained_wrs, 30) {
    struct pair p;
    pair_open(&p, kind, NULL);
    struct bufs x;
    bufs_open(&p, &x);
    enum { N = 16 };
    struct ibv_recv_wr rwr[N], *rbad;
    struct ibv_sge rs[N], ss[N];
    for (int i = 0; i < N; i++) {
        rs[i] = sge(x.b + i * 1024, 1024, x.bmr->lkey);
        rwr[i] = (struct ibv_recv_wr){.wr_id = 100 + i, .next = i + 1 < N ? &rwr[i + 1] : NULL, .sg_list = &rs[i], .num_sge = 1};
    }
    CHECK_OK(ibv_post_recv(p.b.qp, rwr, &rbad));
    struct ibv_send_wr swr[N], *sbad;
    memset(swr, 0, sizeof swr);
    for (int i = 0; i < N; i++) {
        fill_pattern(x.a + i * 1024, 100 + i, 50 + i);
        ss[i] = sge(x.a + i * 1024, 100 + i, x.amr->lkey);
        swr[i].wr_id = 200 + i;
        swr[i].next = i + 1 < N ? &swr[i + 1] : NULL;
        swr[i].sg_list = &ss[i];
        swr[i].num_sge = 1;
        swr[i].opcode = i % 4 == 3 ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
        swr[i].imm_data = htonl(i);
        swr[i].send_flags = IBV_SEND_SIGNALED;
    }
    CHECK_OK(ibv_post_send(p.a.qp, swr, &sbad));
    for (int i = 0; i < N; i++) {
        struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 100 + i, IBV_WC_RECV, p.b.qp->qp_num, 100 + i, i % 4 == 3, htonl(i));
        CHECK(check_pattern(x.b + i * 1024, 100 + i, 50 + i), "data %d", i);
        wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 200 + i, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    /* a chain with an invalid WR (too many SGEs) in the middle: WRs before it are posted and
     * execute, *bad_wr points at the invalid one, nothing after it is posted */
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr ia;
    CHECK_OK(ibv_query_qp(p.a.qp, &qa, IBV_QP_CAP, &ia));
    struct ibv_sge many[64];
    int nsge = ia.cap.max_send_sge + 1;
    CHECK(nsge <= 64, "max_send_sge %u", ia.cap.max_send_sge);
    for (int i = 0; i < nsge; i++) many[i] = sge(x.a, 1, x.amr->lkey);
    for (int i = 0; i < 4; i++) {
        swr[i].opcode = IBV_WR_RDMA_WRITE;
        swr[i].wr.rdma.remote_addr = (uintptr_t)(x.b + 50000 + i * 1024);
        swr[i].wr.rdma.rkey = x.bmr->rkey;
        swr[i].next = i < 3 ? &swr[i + 1] : NULL;
        swr[i].wr_id = 400 + i;
        swr[i].sg_list = &ss[i];
        swr[i].num_sge = 1;
    }
    swr[2].sg_list = many;
    swr[2].num_sge = nsge;
    sbad = NULL;
    int rc = ibv_post_send(p.a.qp, swr, &sbad);
    CHECK(rc != 0, "chain with num_sge > max_send_sge must be refused");
    CHECK(sbad == &swr[2], "bad_wr points at WR %ld, expected 2", sbad ? (long)(sbad - swr) : -1L);
    for (int i = 0; i < 2; i++) {
        struct ibv_wc wc = wait_wc(p.a.scq, TMO);
        check_wc_ok(&wc, 400 + i, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    expect_no_wc(p.a.scq, 50);
    /* the QP still works */
    post_send(p.a.qp, 500, IBV_WR_RDMA_WRITE, x.a, 8, x.amr->lkey, IBV_SEND_SIGNALED, 0, (uintptr_t)x.b, x.bmr->rkey);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 500, IBV_WC_RDMA_WRITE, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    bufs_close(&x);
    pair_close(&p);
}

/* a full send queue refuses further posts (ENOMEM) instead of overwriting. The peer has no
 * receive posted (RNR, retried forever), so nothing can leave the SQ while we fill it. */
TEST_BOTH(sq_full, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.max_send_wr = 8;
    struct pair p;
    pair_open(&p, kind, &o);
    struct bufs x;
    bufs_open(&p, &x);
    struct ibv_qp_attr qa;
    struct ibv_qp_init_attr ia;
    CHECK_OK(ibv_query_qp(p.a.qp, &qa, IBV_QP_CAP, &ia));
    unsigned depth = ia.cap.max_send_wr, posted = 0;
    struct ibv_sge s = sge(x.a, 8, x.amr->lkey);
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    int rc = 0;
    for (; posted < depth + 4; posted++) {
        wr.wr_id = posted;
        wr.send_flags = posted == 0 ? IBV_SEND_SIGNALED : 0;
        rc = ibv_post_send(p.a.qp, &wr, &bad);
        if (rc) break;
    }
    LOG("SQ depth %u, WR %u refused with %d", depth, posted, rc);
    CHECK(rc != 0, "posted %u WRs on a %u-deep SQ without error", posted, depth);
    CHECK(posted >= depth, "only %u of %u posted", posted, depth);
    CHECK(bad == &wr, "bad_wr");
    CHECK_EQ(rc, ENOMEM);
    expect_no_wc(p.a.scq, 50);
    /* let them through */
    for (unsigned i = 0; i < posted; i++) post_recv(p.b.qp, 900 + i, x.b + i * 64, 64, x.bmr->lkey);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 0, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    for (unsigned i = 0; i < posted; i++) {
        wc = wait_wc(p.b.rcq, TMO);
        check_wc_ok(&wc, 900 + i, IBV_WC_RECV, p.b.qp->qp_num, 8, 0, 0);
    }
    bufs_close(&x);
    pair_close(&p);
}

/* SRQ: two QPs share one SRQ; completions name the QP that received */
TEST(srq_shared, 30) {
    struct dev d;
    dev_open(&d);
    if (d.attr.max_srq == 0) {
        dev_close(&d);
        SKIP("device reports max_srq 0");
    }
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    struct ibv_cq *scq = CHECK_PTR(ibv_create_cq(d.ctx, 64, NULL, NULL, 0));
    struct ibv_cq *rcq = CHECK_PTR(ibv_create_cq(d.ctx, 64, NULL, NULL, 0));
    struct ibv_srq_init_attr sa;
    memset(&sa, 0, sizeof sa);
    sa.attr.max_wr = 32;
    sa.attr.max_sge = 1;
    sa.srq_context = (void *)0x99;
    struct ibv_srq *srq = CHECK_PTR(ibv_create_srq(pd, &sa));
    CHECK(srq->srq_context == (void *)0x99 && srq->pd == pd && srq->context == d.ctx, "srq fields");
    CHECK(sa.attr.max_wr >= 32, "srq max_wr written back: %u", sa.attr.max_wr);
    struct ibv_qp *snd[2], *rcv[2];
    for (int i = 0; i < 2; i++) {
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        ia.send_cq = scq;
        ia.recv_cq = rcq;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = 16;
        ia.cap.max_recv_wr = 16;
        ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
        snd[i] = CHECK_PTR(ibv_create_qp(pd, &ia));
        ia.srq = srq;
        ia.cap.max_recv_wr = 0;
        ia.cap.max_recv_sge = 0;
        rcv[i] = CHECK_PTR(ibv_create_qp(pd, &ia));
        CHECK(rcv[i]->srq == srq, "qp->srq");
    }
    for (int i = 0; i < 2; i++) {
        qp_to_init(snd[i], d.port);
        qp_to_init(rcv[i], d.port);
        qp_to_rtr(snd[i], &d, rcv[i]->qp_num, 0, 1);
        qp_to_rtr(rcv[i], &d, snd[i]->qp_num, 0, 1);
        qp_to_rts(snd[i], &d, 0, 14, 7, 7);
        qp_to_rts(rcv[i], &d, 0, 14, 7, 7);
    }
    uint8_t *buf = xalloc(65536);
    struct ibv_mr *mr = reg(pd, buf, 65536, ALL_ACCESS);
    for (int i = 0; i < 8; i++) {
        struct ibv_sge s = sge(buf + 32768 + i * 1024, 1024, mr->lkey);
        struct ibv_recv_wr w = {.wr_id = 100 + i, .sg_list = &s, .num_sge = 1}, *bad;
        CHECK_OK(ibv_post_srq_recv(srq, &w, &bad));
    }
    /* 4 messages alternating between the two senders: SRQ WRs are consumed in order */
    for (int i = 0; i < 4; i++) {
        fill_pattern(buf + i * 1024, 500 + i, 600 + i);
        post_send(snd[i % 2], 200 + i, IBV_WR_SEND, buf + i * 1024, 500 + i, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
        struct ibv_wc wc = wait_wc(rcq, TMO);
        check_wc_ok(&wc, 100 + i, IBV_WC_RECV, rcv[i % 2]->qp_num, 500 + i, 0, 0);
        CHECK(check_pattern(buf + 32768 + i * 1024, 500 + i, 600 + i), "data %d", i);
        wc = wait_wc(scq, TMO);
        check_wc_ok(&wc, 200 + i, IBV_WC_SEND, snd[i % 2]->qp_num, WC_ANY_LEN, 0, 0);
    }
    struct ibv_srq_attr qa;
    CHECK_OK(ibv_query_srq(srq, &qa));
    CHECK(qa.max_wr >= 32, "query_srq max_wr %u", qa.max_wr);
    /* destroying the SRQ while QPs use it is refused */
    CHECK_EQ(ibv_destroy_srq(srq), EBUSY);
    for (int i = 0; i < 2; i++) {
        CHECK_OK(ibv_destroy_qp(snd[i]));
        CHECK_OK(ibv_destroy_qp(rcv[i]));
    }
    CHECK_OK(ibv_destroy_srq(srq));
    dereg(mr);
    CHECK_OK(ibv_destroy_cq(scq));
    CHECK_OK(ibv_destroy_cq(rcq));
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
}
