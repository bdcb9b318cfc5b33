/* 27. a port that goes down and comes back (softrdma_set_port_state; on kernel rxe: ip link set <netdev> down/up) */
#include "common.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE

typedef int (*set_port_fn)(const char *device, unsigned int port, int up);

/* the software device's hook; the kernel's port is the netdev's, which only root in the guest flips */
static set_port_fn port_hook(void) {
    set_port_fn f = (set_port_fn)dlsym(RTLD_DEFAULT, "softrdma_set_port_state");
    if (!f) SKIP("not the software device: kernel rxe's port follows its netdev (ip link set <netdev> down)");
    return f;
}

static void set_port(struct ibv_context *ctx, int up) {
    CHECK_OK(port_hook()(ibv_get_device_name(ctx->device), 1, up));
}

static enum ibv_port_state port_state(struct ibv_context *ctx) {
    struct ibv_port_attr a;
    CHECK_OK(ibv_query_port(ctx, 1, &a));
    return a.state;
}

/* the next async event of ctx, which must be a port event of type for port 1 */
static void expect_port_event(struct ibv_context *ctx, enum ibv_event_type type) {
    struct ibv_async_event ev;
    CHECK(fd_readable(ctx->async_fd, TMO), "no async event within %d ms (expected %s)", TMO,
          ibv_event_type_str(type));
    CHECK_OK(ibv_get_async_event(ctx, &ev));
    CHECK(ev.event_type == type, "async event %s, expected %s", ibv_event_type_str(ev.event_type),
          ibv_event_type_str(type));
    CHECK_EQ(ev.element.port_num, 1);
    ibv_ack_async_event(&ev);
}

TEST(port_down_state_and_events, 20) {
    set_port_fn hook = port_hook();
    struct dev d;
    dev_open(&d);
    struct ibv_context *second = CHECK_PTR(ibv_open_device(d.ctx->device));
    CHECK_EQ(port_state(d.ctx), IBV_PORT_ACTIVE);
    errno = 0;
    CHECK(hook("nosuchdev", 1, 0) == -1 && errno == EINVAL, "unknown device: EINVAL");
    errno = 0;
    CHECK(hook(ibv_get_device_name(d.ctx->device), 2, 0) == -1 && errno == EINVAL, "port 2: EINVAL");
    CHECK(!fd_readable(d.ctx->async_fd, 0), "no event for refused calls");

    set_port(d.ctx, 0);
    CHECK_EQ(port_state(d.ctx), IBV_PORT_DOWN);
    /* every open context of the device gets it */
    expect_port_event(d.ctx, IBV_EVENT_PORT_ERR);
    expect_port_event(second, IBV_EVENT_PORT_ERR);
    /* down again: no change, no event */
    set_port(d.ctx, 0);
    CHECK(!fd_readable(d.ctx->async_fd, 50), "a second down raised an event");

    set_port(d.ctx, 1);
    CHECK_EQ(port_state(d.ctx), IBV_PORT_ACTIVE);
    expect_port_event(d.ctx, IBV_EVENT_PORT_ACTIVE);
    expect_port_event(second, IBV_EVENT_PORT_ACTIVE);
    CHECK(!fd_readable(d.ctx->async_fd, 0), "one event per change");
    CHECK_OK(ibv_close_device(second));
    dev_close(&d);
}

/*
 * While the port is down nothing it sends arrives: the QPs stay in RTS (the port event does not move them), their
 * requests go unanswered, and the retries run out: IBV_WC_RETRY_EXC_ERR, the QP in ERR. The receiver saw nothing.
 */
TEST_BOTH(port_down_sends_exhaust_retries, 30) {
    set_port_fn hook = port_hook();
    struct qp_opts o;
    qp_opts_default(&o);
    o.timeout = 12; /* 16.8 ms */
    o.retry_cnt = 2;
    struct pair p;
    pair_open(&p, kind, &o);
    struct ibv_context *ctx = p.a.qp->context;
    const char *name = ibv_get_device_name(ctx->device);
    char *buf = xalloc(4096), *rbuf = xalloc(4096);
    struct ibv_mr *mr = reg(p.a.pd, buf, 4096, LW);
    struct ibv_mr *rmr = reg(p.b.pd, rbuf, 4096, LW);
    post_recv(p.b.qp, 1, rbuf, 4096, rmr->lkey);
    post_send(p.a.qp, 1, IBV_WR_SEND, buf, 64, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.b.qp->qp_num, 64, 0, 0);

    CHECK_OK(hook(name, 1, 0));
    expect_port_event(ctx, IBV_EVENT_PORT_ERR);
    CHECK_EQ(qp_state(p.a.qp), IBV_QPS_RTS);
    post_recv(p.b.qp, 2, rbuf, 4096, rmr->lkey);
    double t0 = now_ms();
    post_send(p.a.qp, 2, IBV_WR_SEND, buf, 64, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    wc = wait_wc(p.a.scq, TMO);
    check_wc_err(&wc, 2, IBV_WC_RETRY_EXC_ERR, p.a.qp->qp_num);
    LOG("retries exhausted after %.0f ms", now_ms() - t0);
    CHECK_EQ(qp_state(p.a.qp), IBV_QPS_ERR);
    expect_no_wc(p.b.rcq, 50);

    CHECK_OK(hook(name, 1, 1));
    expect_port_event(ctx, IBV_EVENT_PORT_ACTIVE);
    dereg(mr);
    dereg(rmr);
    /* the CM's disconnect of a QP in ERR still goes through once the port is back */
    pair_close(&p);
    /* the port is back: a new pair carries traffic */
    pair_open(&p, kind, &o);
    buf = xalloc(4096);
    rbuf = xalloc(4096);
    mr = reg(p.a.pd, buf, 4096, LW);
    rmr = reg(p.b.pd, rbuf, 4096, LW);
    post_recv(p.b.qp, 3, rbuf, 4096, rmr->lkey);
    post_send(p.a.qp, 3, IBV_WR_SEND, buf, 64, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_RECV, p.b.qp->qp_num, 64, 0, 0);
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    dereg(mr);
    dereg(rmr);
    pair_close(&p);
    sr_leak_check();
}

/* A port that comes back before the retries run out: the resent request completes, nothing is lost. */
TEST(port_back_before_retries_run_out, 30) {
    set_port_fn hook = port_hook();
    struct qp_opts o;
    qp_opts_default(&o);
    o.timeout = 14; /* 67 ms */
    o.retry_cnt = 7;
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    const char *name = ibv_get_device_name(p.a.qp->context->device);
    char *buf = xalloc(4096), *rbuf = xalloc(4096);
    struct ibv_mr *mr = reg(p.a.pd, buf, 4096, LW);
    struct ibv_mr *rmr = reg(p.b.pd, rbuf, 4096, LW);
    fill_pattern(buf, 256, 7);
    post_recv(p.b.qp, 1, rbuf, 4096, rmr->lkey);
    CHECK_OK(hook(name, 1, 0));
    post_send(p.a.qp, 1, IBV_WR_SEND, buf, 256, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    expect_no_wc(p.b.rcq, 30);
    CHECK_OK(hook(name, 1, 1));
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.b.qp->qp_num, 256, 0, 0);
    CHECK(check_pattern(rbuf, 256, 7), "payload after the retry");
    wc = wait_wc(p.a.scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_SEND, p.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    dereg(mr);
    dereg(rmr);
    pair_close(&p);
}

/*
 * rdma_cm over a port that is down: resolving an address fails (ADDR_ERROR, -ENETUNREACH: the kernel finds no route
 * once the netdev is down), a connect of an id resolved before fails (UNREACHABLE, -ENETUNREACH), and a listener
 * keeps listening: after the port is back it accepts again.
 */
TEST(port_down_cm_fails_listener_stays, 30) {
    set_port_fn hook = port_hook();
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(lec, &listen);
    struct rdma_cm_id *early = cm_resolve(cec, test_addr(), port);
    const char *name = ibv_get_device_name(early->verbs->device);
    struct qp_opts o;
    qp_opts_default(&o);
    struct ep e;
    cm_ep_setup(&e, early, cec, &o);
    CHECK_OK(hook(name, 1, 0));

    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(cec, &id, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa = test_sockaddr(port);
    CHECK_OK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000));
    struct rdma_cm_event *ev = cm_expect(cec, RDMA_CM_EVENT_ADDR_ERROR, TMO);
    CHECK(ev->id == id, "ADDR_ERROR on the id");
    CHECK_EQ(ev->status, -ENETUNREACH);
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_destroy_id(id));

    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.retry_count = 7;
    CHECK_OK(rdma_connect(early, &cp));
    ev = cm_expect(cec, RDMA_CM_EVENT_UNREACHABLE, TMO);
    CHECK_EQ(ev->status, -ENETUNREACH);
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK(!fd_readable(lec->fd, 50), "the listener heard of a connect that never left");
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(early));

    CHECK_OK(hook(name, 1, 1));
    id = cm_resolve(cec, test_addr(), port);
    cm_ep_setup(&e, id, cec, &o);
    CHECK_OK(rdma_connect(id, &cp));
    ev = cm_expect(lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    CHECK(ev->listen_id == listen, "the listener of before the port went down");
    struct rdma_cm_id *sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_reject(sid, NULL, 0));
    ev = cm_expect(cec, RDMA_CM_EVENT_REJECTED, TMO);
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_destroy_id(sid));
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(id));
    CHECK_OK(rdma_destroy_id(listen));
    rdma_destroy_event_channel(lec);
    rdma_destroy_event_channel(cec);
}

static void control_teardown(void) {
    rundir_remove(getpid(), "portfile");
}

/* The control file: <SOFTRDMA_RUNDIR>/<device>-port1-down takes the port down in every process of the directory
 * (here a private one: the default directory is every other test program's of this user), its removal back up. */
SR_TEST_FULL(port_control_file, "port_control_file", 20, control_teardown) {
    port_hook();
    rundir_private("portfile");
    struct dev d;
    dev_open(&d);
    char path[512];
    snprintf(path, sizeof path, "%s/%s-port1-down", rundir_path(), ibv_get_device_name(d.ctx->device));
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "create %s: %s", path, strerror(errno));
    fclose(f);
    expect_port_event(d.ctx, IBV_EVENT_PORT_ERR);
    CHECK_EQ(port_state(d.ctx), IBV_PORT_DOWN);
    CHECK_OK(unlink(path));
    expect_port_event(d.ctx, IBV_EVENT_PORT_ACTIVE);
    CHECK_EQ(port_state(d.ctx), IBV_PORT_ACTIVE);
    dev_close(&d);
}
