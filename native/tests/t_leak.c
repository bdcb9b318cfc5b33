/* 10. the object counters of the software device (the per-test leak check uses them after every test) */
#include "common.h"

static void expect_count(const char *kind, long want) {
    long c = sr_object_count(kind);
    if (c != want) FAIL("softrdma_object_count(\"%s\") = %ld, expected %ld", kind, c, want);
}

TEST(leak_counters, 30) {
    if (!sr_object_count) SKIP("softrdma_object_count not exported: not the software device (leak checks off)");
    const char *kinds[] = {"context", "pd", "mr", "cq", "comp_channel", "qp", "srq", "cm_id", "cm_channel", "mw"};
    for (unsigned i = 0; i < sizeof kinds / sizeof *kinds; i++) expect_count(kinds[i], 0);
    struct dev d;
    dev_open(&d);
    expect_count("context", 1);
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    expect_count("pd", 1);
    void *buf = xalloc(4096);
    struct ibv_mr *mr = reg(pd, buf, 4096, IBV_ACCESS_LOCAL_WRITE);
    expect_count("mr", 1);
    struct ibv_mw *mw = CHECK_PTR(ibv_alloc_mw(pd, IBV_MW_TYPE_2));
    expect_count("mw", 1);
    CHECK_OK(ibv_dealloc_mw(mw));
    expect_count("mw", 0);
    struct ibv_comp_channel *ch = CHECK_PTR(ibv_create_comp_channel(d.ctx));
    expect_count("comp_channel", 1);
    struct ibv_cq *cq = CHECK_PTR(ibv_create_cq(d.ctx, 16, NULL, ch, 0));
    expect_count("cq", 1);
    struct ibv_srq_init_attr sa = {.attr = {.max_wr = 4, .max_sge = 1}};
    struct ibv_srq *srq = d.attr.max_srq ? CHECK_PTR(ibv_create_srq(pd, &sa)) : NULL;
    if (srq) expect_count("srq", 1);
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 4;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    struct ibv_qp *qp = CHECK_PTR(ibv_create_qp(pd, &ia));
    expect_count("qp", 1);
    CHECK_OK(ibv_destroy_qp(qp));
    expect_count("qp", 0);
    if (srq) CHECK_OK(ibv_destroy_srq(srq));
    expect_count("srq", 0);
    CHECK_OK(ibv_destroy_cq(cq));
    expect_count("cq", 0);
    CHECK_OK(ibv_destroy_comp_channel(ch));
    expect_count("comp_channel", 0);
    dereg(mr);
    expect_count("mr", 0);
    CHECK_OK(ibv_dealloc_pd(pd));
    expect_count("pd", 0);
    dev_close(&d);
    expect_count("context", 0);
    /* rdma_cm objects (librdmacm may keep device contexts open afterwards, by design) */
    struct rdma_event_channel *ec = cm_channel();
    expect_count("cm_channel", 1);
    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP));
    expect_count("cm_id", 1);
    CHECK_OK(rdma_destroy_id(id));
    expect_count("cm_id", 0);
    rdma_destroy_event_channel(ec);
    expect_count("cm_channel", 0);
}
