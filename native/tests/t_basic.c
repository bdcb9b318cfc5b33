/* 1. devices, objects, QP state machine */
#include "common.h"

TEST(device_list, 20) {
    int n = -1;
    struct ibv_device **l = CHECK_PTR(ibv_get_device_list(&n));
    CHECK(n >= 1, "n=%d", n);
    CHECK(l[n] == NULL, "device list is NULL-terminated");
    for (int i = 0; i < n; i++) {
        const char *name = ibv_get_device_name(l[i]);
        CHECK(name && *name, "device %d has a name", i);
        CHECK(strlen(name) < IBV_SYSFS_NAME_MAX, "name length");
        CHECK(!strcmp(name, l[i]->name), "ibv_get_device_name == device->name");
        LOG("device %d: %s node_type %d transport %d guid 0x%llx", i, name, l[i]->node_type, l[i]->transport_type,
            (unsigned long long)be64toh(ibv_get_device_guid(l[i])));
        CHECK(l[i]->transport_type == IBV_TRANSPORT_IB, "transport_type %d (IB for RoCE)", l[i]->transport_type);
    }
    ibv_free_device_list(l);
    /* NULL num_devices is allowed */
    l = CHECK_PTR(ibv_get_device_list(NULL));
    ibv_free_device_list(l);
}

TEST(device_open_query, 20) {
    struct dev d;
    dev_open(&d);
    struct ibv_device_attr a;
    memset(&a, 0, sizeof a);
    CHECK_OK(ibv_query_device(d.ctx, &a));
    CHECK(a.phys_port_cnt >= 1, "phys_port_cnt %d", a.phys_port_cnt);
    CHECK(a.max_qp >= 64, "max_qp %d", a.max_qp);
    CHECK(a.max_qp_wr >= 64, "max_qp_wr %d", a.max_qp_wr);
    CHECK(a.max_sge >= 2, "max_sge %d", a.max_sge);
    CHECK(a.max_cq >= 16 && a.max_cqe >= 256, "max_cq %d max_cqe %d", a.max_cq, a.max_cqe);
    CHECK(a.max_mr >= 16 && a.max_mr_size >= (64u << 20), "max_mr %d max_mr_size %llu", a.max_mr,
          (unsigned long long)a.max_mr_size);
    CHECK(a.max_pd >= 16, "max_pd %d", a.max_pd);
    CHECK(a.max_qp_rd_atom >= 1 && a.max_qp_init_rd_atom >= 1, "rd_atom %d/%d", a.max_qp_rd_atom,
          a.max_qp_init_rd_atom);
    LOG("fw '%s' vendor 0x%x part %u max_qp %d max_qp_wr %d max_sge %d max_cqe %d atomic_cap %d max_srq %d", a.fw_ver,
        a.vendor_id, a.vendor_part_id, a.max_qp, a.max_qp_wr, a.max_sge, a.max_cqe, a.atomic_cap, a.max_srq);
    struct ibv_port_attr p;
    memset(&p, 0, sizeof p);
    CHECK_OK(ibv_query_port(d.ctx, d.port, &p));
    CHECK_EQ(p.state, IBV_PORT_ACTIVE);
    CHECK_EQ(p.link_layer, IBV_LINK_LAYER_ETHERNET);
    CHECK(p.active_mtu >= IBV_MTU_256 && p.active_mtu <= IBV_MTU_4096, "active_mtu %d", p.active_mtu);
    CHECK(p.max_mtu >= p.active_mtu, "max_mtu %d < active_mtu %d", p.max_mtu, p.active_mtu);
    CHECK(p.gid_tbl_len >= 1, "gid_tbl_len %d", p.gid_tbl_len);
    CHECK(p.pkey_tbl_len >= 1, "pkey_tbl_len %d", p.pkey_tbl_len);
    /* the GID for the test address is present (dev_open found it) and stable */
    union ibv_gid g;
    CHECK_OK(ibv_query_gid(d.ctx, d.port, d.gid_index, &g));
    CHECK(!memcmp(&g, &d.gid, sizeof g), "GID stable");
    char s[64];
    inet_ntop(AF_INET6, g.raw, s, sizeof s);
    LOG("gid[%d] = %s", d.gid_index, s);
    uint16_t pkey = 0;
    CHECK_OK(ibv_query_pkey(d.ctx, d.port, 0, &pkey));
    CHECK_EQ(ntohs(pkey), 0xffff);
    /* an async fd exists and is quiet */
    CHECK(d.ctx->async_fd >= 0, "async_fd");
    CHECK(d.ctx->num_comp_vectors >= 1, "num_comp_vectors %d", d.ctx->num_comp_vectors);
    /* invalid port */
    CHECK(ibv_query_port(d.ctx, a.phys_port_cnt + 1, &p) != 0, "query of a nonexistent port fails");
    dev_close(&d);
}

TEST(objects_create_destroy, 30) {
    struct dev d;
    dev_open(&d);
    for (int round = 0; round < 3; round++) {
        struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
        CHECK(pd->context == d.ctx, "pd->context");
        size_t len = 1 << 20;
        void *buf = xalloc(len);
        struct ibv_mr *mr = reg(pd, buf, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ);
        struct ibv_mr *mr2 = reg(pd, (char *)buf + 100, 1000, IBV_ACCESS_LOCAL_WRITE);
        CHECK(mr->lkey != mr2->lkey, "distinct lkeys");
        CHECK(mr->context == d.ctx, "mr->context");
        struct ibv_mr *mr3 = reg(pd, buf, 4096, 0); /* read-only local MR is legal */
        /* REMOTE_WRITE without LOCAL_WRITE is invalid (man ibv_reg_mr) */
        errno = 0;
        struct ibv_mr *bad = ibv_reg_mr(pd, buf, 4096, IBV_ACCESS_REMOTE_WRITE);
        CHECK(bad == NULL && errno == EINVAL, "REMOTE_WRITE without LOCAL_WRITE: mr %p errno %d", (void *)bad, errno);
        struct ibv_comp_channel *ch = CHECK_PTR(ibv_create_comp_channel(d.ctx));
        CHECK(ch->fd >= 0 && ch->context == d.ctx, "channel fd/context");
        void *cq_ctx = (void *)0x1234;
        struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d.ctx, 100, cq_ctx, ch, 0));
        CHECK(cq->cqe >= 100, "cq->cqe %d", cq->cqe);
        CHECK(cq->context == d.ctx && cq->cq_context == cq_ctx && cq->channel == ch, "cq fields");
        struct ibv_cq *cq2 = CHECK_PTR(ibv_create_cq(d.ctx, 1, NULL, NULL, 0));
        CHECK(cq2->cqe >= 1, "cq2->cqe");
        struct ibv_qp_init_attr ia;
        memset(&ia, 0, sizeof ia);
        ia.qp_context = (void *)0x5678;
        ia.send_cq = cq;
        ia.recv_cq = cq2;
        ia.qp_type = IBV_QPT_RC;
        ia.cap.max_send_wr = 32;
        ia.cap.max_recv_wr = 16;
        ia.cap.max_send_sge = 2;
        ia.cap.max_recv_sge = 1;
        ia.cap.max_inline_data = 32;
        struct ibv_qp *qp = CHECK_PTR(ibv_create_qp(pd, &ia));
        CHECK(ia.cap.max_send_wr >= 32 && ia.cap.max_recv_wr >= 16 && ia.cap.max_send_sge >= 2 &&
                  ia.cap.max_recv_sge >= 1 && ia.cap.max_inline_data >= 32,
              "caps written back: %u %u %u %u %u", ia.cap.max_send_wr, ia.cap.max_recv_wr, ia.cap.max_send_sge,
              ia.cap.max_recv_sge, ia.cap.max_inline_data);
        CHECK(qp->qp_num != 0 && qp->qp_num < (1u << 24), "qp_num 0x%x", qp->qp_num);
        CHECK(qp->context == d.ctx && qp->pd == pd && qp->send_cq == cq && qp->recv_cq == cq2 &&
                  qp->qp_context == (void *)0x5678 && qp->srq == NULL,
              "qp fields");
        CHECK_EQ(qp->qp_type, IBV_QPT_RC);
        CHECK_EQ(qp->state, IBV_QPS_RESET);
        struct ibv_qp *qp2 = CHECK_PTR(ibv_create_qp(pd, &ia));
        CHECK(qp2->qp_num != qp->qp_num, "distinct qp_num");
        /* too large a request is refused */
        struct ibv_qp_init_attr big = ia;
        big.cap.max_send_wr = d.attr.max_qp_wr + 1;
        errno = 0;
        struct ibv_qp *qpb = ibv_create_qp(pd, &big);
        CHECK(qpb == NULL, "create_qp with max_send_wr > max_qp_wr must fail");
        CHECK_OK(ibv_destroy_qp(qp2));
        CHECK_OK(ibv_destroy_qp(qp));
        CHECK_OK(ibv_destroy_cq(cq2));
        CHECK_OK(ibv_destroy_cq(cq));
        CHECK_OK(ibv_destroy_comp_channel(ch));
        dereg(mr3);
        dereg(mr2);
        dereg(mr);
        CHECK_OK(ibv_dealloc_pd(pd));
    }
    dev_close(&d);
}

/* destroying a resource still in use fails with EBUSY (kernel uverbs semantics) */
TEST(destroy_busy, 20) {
    struct dev d;
    dev_open(&d);
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    void *buf = xalloc(4096);
    struct ibv_mr *mr = reg(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    CHECK_EQ(ibv_dealloc_pd(pd), EBUSY);
    struct ibv_comp_channel *ch = CHECK_PTR(ibv_create_comp_channel(d.ctx));
    struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d.ctx, 16, NULL, ch, 0));
    CHECK_EQ(ibv_destroy_comp_channel(ch), EBUSY);
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    struct ibv_qp *qp = CHECK_PTR(ibv_create_qp(pd, &ia));
    CHECK_EQ(ibv_destroy_cq(cq), EBUSY);
    CHECK_OK(ibv_destroy_qp(qp));
    CHECK_OK(ibv_destroy_cq(cq));
    CHECK_OK(ibv_destroy_comp_channel(ch));
    dereg(mr);
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
}

static struct ibv_qp *mkqp(struct ibv_pd *pd, struct ibv_cq *cq) {
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    return CHECK_PTR(ibv_create_qp(pd, &ia));
}

static void expect_einval(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask, const char *what) {
    enum ibv_qp_state before = qp_state(qp);
    int rc = ibv_modify_qp(qp, a, mask);
    if (rc != EINVAL) FAIL("%s: ibv_modify_qp returned %d (errno %d), expected EINVAL (%d)", what, rc, errno, EINVAL);
    CHECK_EQ(qp_state(qp), before);
    CHECK_EQ(qp->state, before);
}

TEST(qp_state_machine, 30) {
    struct dev d;
    dev_open(&d);
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d.ctx, 32, NULL, NULL, 0));
    struct ibv_qp *qp = mkqp(pd, cq), *peer = mkqp(pd, cq);
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    CHECK_EQ(qp_state(qp), IBV_QPS_RESET);

    /* illegal transitions from RESET */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    expect_einval(qp, &a, IBV_QP_STATE, "RESET->RTR");
    a.qp_state = IBV_QPS_RTS;
    expect_einval(qp, &a, IBV_QP_STATE, "RESET->RTS");
    /* missing required attributes for RESET->INIT (needs PKEY_INDEX, PORT, ACCESS_FLAGS) */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.port_num = d.port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    expect_einval(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS, "RESET->INIT without PORT");
    /* invalid port number */
    a.port_num = d.attr.phys_port_cnt + 1;
    expect_einval(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT with bad port");
    /* attribute not allowed for this transition (SQ_PSN on RESET->INIT) */
    a.port_num = d.port;
    a.sq_psn = 5;
    expect_einval(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS | IBV_QP_SQ_PSN,
                  "RESET->INIT with SQ_PSN");

    qp_to_init(qp, d.port);
    CHECK_EQ(qp_state(qp), IBV_QPS_INIT);
    CHECK_EQ(qp->state, IBV_QPS_INIT);
    /* INIT->INIT is legal */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.qp_access_flags = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE;
    CHECK_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_ACCESS_FLAGS));
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    expect_einval(qp, &a, IBV_QP_STATE, "INIT->RTS");
    /* RTR without the address vector / dest qpn */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = d.pattr.active_mtu;
    a.dest_qp_num = peer->qp_num;
    a.rq_psn = 1;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 12;
    expect_einval(qp, &a,
                  IBV_QP_STATE | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
                      IBV_QP_MIN_RNR_TIMER,
                  "INIT->RTR without AV");
    qp_to_rtr(qp, &d, peer->qp_num, 0x100, 12);
    CHECK_EQ(qp_state(qp), IBV_QPS_RTR);
    CHECK_EQ(qp->state, IBV_QPS_RTR);
    /* RTS without SQ_PSN/TIMEOUT/... */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.max_rd_atomic = 1;
    expect_einval(qp, &a, IBV_QP_STATE | IBV_QP_MAX_QP_RD_ATOMIC, "RTR->RTS without SQ_PSN/TIMEOUT/RETRY_CNT/RNR_RETRY");
    qp_to_rts(qp, &d, 0x200, 14, 7, 7);
    CHECK_EQ(qp->state, IBV_QPS_RTS);
    /* query reports the attributes set */
    memset(&a, 0, sizeof a);
    memset(&ia, 0, sizeof ia);
    CHECK_OK(ibv_query_qp(qp, &a,
                          IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RQ_PSN | IBV_QP_DEST_QPN | IBV_QP_PATH_MTU |
                              IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER |
                              IBV_QP_ACCESS_FLAGS | IBV_QP_PORT | IBV_QP_CAP,
                          &ia));
    CHECK_EQ(a.qp_state, IBV_QPS_RTS);
    CHECK_EQ(a.sq_psn, 0x200);
    CHECK_EQ(a.rq_psn, 0x100);
    CHECK_EQ(a.dest_qp_num, peer->qp_num);
    CHECK_EQ(a.path_mtu, d.pattr.active_mtu);
    CHECK_EQ(a.timeout, 14);
    CHECK_EQ(a.retry_cnt, 7);
    CHECK_EQ(a.rnr_retry, 7);
    CHECK_EQ(a.min_rnr_timer, 12);
    CHECK_EQ(a.port_num, d.port);
    CHECK(a.qp_access_flags & IBV_ACCESS_REMOTE_WRITE, "access flags 0x%x", a.qp_access_flags);
    CHECK(ia.cap.max_send_wr >= 8 && ia.cap.max_recv_wr >= 8, "init_attr caps %u %u", ia.cap.max_send_wr,
          ia.cap.max_recv_wr);
    CHECK(ia.send_cq == cq && ia.recv_cq == cq, "init_attr cqs");
    CHECK_EQ(ia.qp_type, IBV_QPT_RC);
    /* RTS->RTS legal (e.g. changing min_rnr_timer) */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.min_rnr_timer = 14;
    CHECK_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER));
    /* RTS->RTR illegal */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    expect_einval(qp, &a, IBV_QP_STATE, "RTS->RTR");
    /* any -> ERR, ERR -> RESET, RESET -> INIT again */
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_ERR;
    CHECK_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE));
    CHECK_EQ(qp_state(qp), IBV_QPS_ERR);
    CHECK_EQ(qp->state, IBV_QPS_ERR);
    a.qp_state = IBV_QPS_RTS;
    expect_einval(qp, &a, IBV_QP_STATE, "ERR->RTS");
    a.qp_state = IBV_QPS_RESET;
    CHECK_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE));
    CHECK_EQ(qp_state(qp), IBV_QPS_RESET);
    qp_to_init(qp, d.port);
    /* INIT -> ERR and RESET directly */
    a.qp_state = IBV_QPS_RESET;
    CHECK_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE));
    CHECK_EQ(qp_state(qp), IBV_QPS_RESET);
    /* RESET -> ERR is not a legal transition (ib_modify_qp_is_ok) */
    a.qp_state = IBV_QPS_ERR;
    expect_einval(qp, &a, IBV_QP_STATE, "RESET->ERR");

    CHECK_OK(ibv_destroy_qp(qp));
    CHECK_OK(ibv_destroy_qp(peer));
    CHECK_OK(ibv_destroy_cq(cq));
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
}

/* post_send before RTS fails immediately; post_recv in RESET fails, in INIT works */
TEST(post_before_rts, 20) {
    struct dev d;
    dev_open(&d);
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d.ctx, 32, NULL, NULL, 0));
    struct ibv_qp *qp = mkqp(pd, cq), *peer = mkqp(pd, cq);
    void *buf = xalloc(4096);
    struct ibv_mr *mr = reg(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    struct ibv_sge s = sge(buf, 64, mr->lkey);
    struct ibv_send_wr wr, *bad;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = 1;
    wr.sg_list = &s;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    struct ibv_recv_wr rwr, *rbad;
    memset(&rwr, 0, sizeof rwr);
    rwr.wr_id = 2;
    rwr.sg_list = &s;
    rwr.num_sge = 1;

    bad = NULL;
    CHECK(ibv_post_send(qp, &wr, &bad) != 0, "post_send in RESET must fail");
    /* bad_wr must point at the refused WR; kernel rxe leaves it NULL (it refuses at the doorbell) */
    CHECK(bad == &wr || (bad == NULL && !sr_object_count), "bad_wr %p, expected %p", (void *)bad, (void *)&wr);
    rbad = NULL;
    CHECK(ibv_post_recv(qp, &rwr, &rbad) != 0, "post_recv in RESET must fail");
    CHECK(rbad == &rwr || (rbad == NULL && !sr_object_count), "bad_wr (recv) %p", (void *)rbad);
    qp_to_init(qp, d.port);
    bad = NULL;
    CHECK(ibv_post_send(qp, &wr, &bad) != 0, "post_send in INIT must fail");
    /* bad_wr must point at the refused WR; kernel rxe leaves it NULL (it refuses at the doorbell) */
    CHECK(bad == &wr || (bad == NULL && !sr_object_count), "bad_wr %p, expected %p", (void *)bad, (void *)&wr);
    CHECK_OK(ibv_post_recv(qp, &rwr, &rbad)); /* legal in INIT */
    qp_to_rtr(qp, &d, peer->qp_num, 0, 12);
    bad = NULL;
    CHECK(ibv_post_send(qp, &wr, &bad) != 0, "post_send in RTR must fail");
    /* bad_wr must point at the refused WR; kernel rxe leaves it NULL (it refuses at the doorbell) */
    CHECK(bad == &wr || (bad == NULL && !sr_object_count), "bad_wr %p, expected %p", (void *)bad, (void *)&wr);
    /* nothing completed */
    expect_no_wc(cq, 50);
    CHECK_OK(ibv_destroy_qp(qp));
    CHECK_OK(ibv_destroy_qp(peer));
    dereg(mr);
    CHECK_OK(ibv_destroy_cq(cq));
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
}

/* a QP moved to ERR flushes its posted receives with IBV_WC_WR_FLUSH_ERR */
TEST(modify_err_flushes, 20) {
    struct pair p;
    pair_open(&p, CONN_VERBS, NULL);
    void *buf = xalloc(4096);
    struct ibv_mr *mr = reg(p.b.pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    for (int i = 0; i < 3; i++) post_recv(p.b.qp, 100 + i, (char *)buf + i * 64, 64, mr->lkey);
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_ERR;
    CHECK_OK(ibv_modify_qp(p.b.qp, &a, IBV_QP_STATE));
    for (int i = 0; i < 3; i++) {
        struct ibv_wc wc = wait_wc(p.b.rcq, 5000);
        check_wc_err(&wc, 100 + i, IBV_WC_WR_FLUSH_ERR, p.b.qp->qp_num);
    }
    /* posting in ERR: completes with flush error (kernel rxe 6.1 never flushes it: tolerated there) */
    post_recv(p.b.qp, 200, buf, 64, mr->lkey);
    if (sr_object_count) {
        struct ibv_wc wc = wait_wc(p.b.rcq, 5000);
        check_wc_err(&wc, 200, IBV_WC_WR_FLUSH_ERR, p.b.qp->qp_num);
        expect_no_wc(p.b.rcq, 20);
    }
    /* and a send posted in ERR too */
    post_send(p.b.qp, 201, IBV_WR_SEND, buf, 8, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.b.scq, 5000);
    check_wc_err(&wc, 201, IBV_WC_WR_FLUSH_ERR, p.b.qp->qp_num);
    dereg(mr);
    pair_close(&p);
}
