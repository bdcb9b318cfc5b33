/* 15. port counters: RNR NAKs and packets counted where kernel rxe counts them, read as rxe's hw_counters are */
#include "common.h"

#include <dlfcn.h>
#include <unistd.h>

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE

/* the software device's softrdma_hw_counter, else the kernel's sysfs file of the same name; -1 if neither */
static long long counter(const struct dev *d, const char *name) {
    long long (*soft)(const char *) = (long long (*)(const char *))dlsym(RTLD_DEFAULT, "softrdma_hw_counter");
    if (soft) return soft(name);
    char path[256];
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/hw_counters/%s",
             ibv_get_device_name(d->ctx->device), d->port, name);
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    long long v = -1;
    if (fscanf(f, "%lld", &v) != 1) v = -1;
    fclose(f);
    return v;
}

/* a kernel device refreshes what sysfs shows at most once per lifespan (ms): wait one out before reading again */
static void wait_lifespan(const struct dev *d) {
    if (dlsym(RTLD_DEFAULT, "softrdma_hw_counter")) return;
    char path[256];
    snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%u/hw_counters/lifespan",
             ibv_get_device_name(d->ctx->device), d->port);
    FILE *f = fopen(path, "r");
    int ms = 10;
    if (f) {
        if (fscanf(f, "%d", &ms) != 1) ms = 10;
        fclose(f);
    }
    usleep((useconds_t)(ms + 50) * 1000);
}

TEST(hw_counters_rnr, 30) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.rnr_retry = 1;
    o.min_rnr_timer = 1;
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    const char *names[] = {"sent_pkts", "rcvd_pkts", "rcvd_rnr_err", "send_rnr_err", "retry_rnr_exceeded_err",
                           "rdma_sends", "rdma_recvs"};
    enum { SENT, RCVD, RCV_RNR, SND_RNR, RNR_EXC, SENDS, RECVS, N };
    long long before[N];
    for (int i = 0; i < N; i++) {
        before[i] = counter(&p.dev, names[i]);
        if (before[i] < 0) SKIP("no counter %s on %s", names[i], ibv_get_device_name(p.dev.ctx->device));
    }
    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(p.a.pd, a, 8192, LW), *bmr = reg(p.b.pd, b, 8192, LW);
    /* one SEND received, then one that finds no receive: RNR NAK, one retry, another NAK, retry exceeded */
    post_recv(p.b.qp, 1, b, 4096, bmr->lkey);
    post_send(p.a.qp, 2, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.b.qp->qp_num, 100, 0, 0);
    post_send(p.a.qp, 3, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    wc = wait_wc(p.a.scq, 10000);
    check_wc_err(&wc, 3, IBV_WC_RNR_RETRY_EXC_ERR, p.a.qp->qp_num);
    wait_lifespan(&p.dev);
    long long d[N];
    for (int i = 0; i < N; i++) {
        d[i] = counter(&p.dev, names[i]) - before[i];
        LOG("%s +%lld", names[i], d[i]);
    }
    /* both ends are on this device: each side's packets count once sent and once received */
    CHECK(d[SENT] >= 5, "sent_pkts +%lld: 3 requests, an ACK and 2 RNR NAKs", d[SENT]);
    CHECK(d[RCVD] >= 5, "rcvd_pkts +%lld", d[RCVD]);
    CHECK_EQ(d[RCV_RNR], 2);
    CHECK_EQ(d[SND_RNR], 2);
    CHECK_EQ(d[RNR_EXC], 1);
    CHECK_EQ(d[SENDS], 2); /* the failed SEND's completion counts too (rxe's do_complete) */
    CHECK_EQ(d[RECVS], 1);
    pair_close(&p);
}
