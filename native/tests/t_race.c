/* Objects shared between threads: events held while their object is destroyed, connect requests of a
 * listener that is migrated or destroyed, QPs destroyed while rdma_cm is still moving them. */
#include <pthread.h>

#include "common.h"

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE

static struct rdma_conn_param race_param(void) {
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = 1;
    cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    return cp;
}

/*
 * A connection request nobody has retrieved yet belongs to its listener: destroying the listener
 * destroys it. When its client went away first (the request failed before anyone claimed it), no
 * event of that connection may be left behind on the channel (the kernel reports no event for a
 * new connection before its CONNECT_REQUEST is retrieved). An event left there named a freed id.
 */
TEST(cm_unclaimed_request_dies_with_listener, 30) {
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(lec, &listen);
    struct qp_opts o;
    qp_opts_default(&o);
    struct rdma_cm_id *cid = cm_resolve(cec, test_addr(), port);
    struct ep a;
    memset(&a, 0, sizeof a);
    cm_ep_setup(&a, cid, cec, &o);
    struct rdma_conn_param cp = race_param();
    CHECK_OK(rdma_connect(cid, &cp));
    CHECK(fd_readable(lec->fd, TMO), "no CONNECT_REQUEST within %d ms", TMO);
    /* the client gives up before the server looked at the request */
    ep_destroy(&a);
    CHECK_OK(rdma_destroy_id(cid));
    msleep(200); /* the server's rdma_cm notices the client is gone */
    CHECK_OK(rdma_destroy_id(listen));
    struct rdma_cm_event *ev = cm_next(lec, 300);
    if (ev) {
        LOG("left on the channel: %s status %d, id %p (context %p)", rdma_event_str(ev->event), ev->status,
            (void *)ev->id, ev->id->context);
        FAIL("event %s left for a connection whose request died with its listener", rdma_event_str(ev->event));
    }
    /* whatever the client's channel got (REJECTED, UNREACHABLE...) was for a destroyed id: none may be left */
    CHECK(!fd_readable(cec->fd, 0), "event left for the destroyed client id");
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(lec);
}

/*
 * rdma_migrate_id moves "any pending events associated with the rdma_cm_id": a listener's pending
 * connect requests go with it, and the new id lives on the channel the request is retrieved from.
 * The old channel may then be destroyed. Before, the request stayed on the old channel, freed with
 * it, while the new connection still pointed at it (its next event was written into freed memory).
 */
TEST(cm_migrate_listener_with_pending_request, 30) {
    /* A documented difference (DEVICE-FAILURES.md): the kernel's ucma creates a pending request's new id on the
     * file the listener had when the request arrived; the request moves with the listener but its id does not,
     * so closing the old channel takes the new id along (on kernel rxe, 6.1, this sequence hangs in it). The
     * software device moves both, which is what this test checks. */
    if (!sr_object_count) SKIP("kernel ucma keeps a pending request's id on the listener's old channel");
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel(), *ec2 = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(lec, &listen);
    struct qp_opts o;
    qp_opts_default(&o);
    struct rdma_cm_id *cid = cm_resolve(cec, test_addr(), port);
    struct ep a;
    memset(&a, 0, sizeof a);
    cm_ep_setup(&a, cid, cec, &o);
    struct rdma_conn_param cp = race_param();
    CHECK_OK(rdma_connect(cid, &cp));
    CHECK(fd_readable(lec->fd, TMO), "no CONNECT_REQUEST within %d ms", TMO);
    CHECK_OK(rdma_migrate_id(listen, ec2));
    CHECK(!fd_readable(lec->fd, 0), "the pending connect request stayed on the old channel");
    rdma_destroy_event_channel(lec); /* no id uses it any more */
    struct rdma_cm_event *ev = cm_expect(ec2, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    CHECK(ev->listen_id == listen, "listen_id");
    struct rdma_cm_id *sid = ev->id;
    CHECK(sid->channel == ec2, "the new id is on the channel its request came from");
    CHECK_OK(rdma_ack_cm_event(ev));
    struct ep b;
    memset(&b, 0, sizeof b);
    cm_ep_setup(&b, sid, ec2, &o);
    CHECK_OK(rdma_accept(sid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec2, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    /* the connection's later events arrive on the new channel too */
    CHECK_OK(rdma_disconnect(cid));
    ev = cm_expect(ec2, RDMA_CM_EVENT_DISCONNECTED, TMO);
    CHECK(ev->id == sid, "DISCONNECTED id");
    CHECK_OK(rdma_ack_cm_event(ev));
    rdma_disconnect(sid);
    CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    ep_destroy(&a);
    ep_destroy(&b);
    CHECK_OK(rdma_destroy_id(sid));
    CHECK_OK(rdma_destroy_id(cid));
    CHECK_OK(rdma_destroy_id(listen));
    rdma_destroy_event_channel(ec2);
    rdma_destroy_event_channel(cec);
}

/* the eventfd of a channel is readable exactly while an event is queued: an id destroyed with
 * undelivered events leaves nothing behind (a blocking rdma_get_cm_event after POLLIN must not hang) */
TEST(cm_destroyed_id_leaves_channel_quiet, 20) {
    struct rdma_event_channel *ec = cm_channel();
    for (int i = 0; i < 3; i++) {
        struct rdma_cm_id *id;
        CHECK_OK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP));
        struct sockaddr_in sa = test_sockaddr(4791);
        CHECK_OK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000));
        CHECK(fd_readable(ec->fd, TMO), "no ADDR_RESOLVED");
        CHECK_OK(rdma_destroy_id(id)); /* its event was never retrieved */
        CHECK(!fd_readable(ec->fd, 50), "channel readable after its only id was destroyed (round %d)", i);
    }
    rdma_destroy_event_channel(ec);
}

struct held_event {
    struct rdma_event_channel *ec;
    volatile int got;
    double acked_ms;
    void *ctx_seen;
};

static void *hold_event(void *arg) {
    struct held_event *h = arg;
    struct rdma_cm_event *ev = NULL;
    if (rdma_get_cm_event(h->ec, &ev)) return NULL;
    __atomic_store_n(&h->got, 1, __ATOMIC_SEQ_CST);
    msleep(300);
    h->ctx_seen = ev->id->context; /* still valid: the id cannot be gone before the ack */
    h->acked_ms = now_ms();
    rdma_ack_cm_event(ev);
    return NULL;
}

/*
 * rdma_cm(7)/rdma_get_cm_event(3): "Destruction of an rdma_cm_id will block until related events
 * have been acknowledged." A thread holding an event may use event->id until it acks; destroying
 * the id from another thread meanwhile freed it under that thread.
 */
TEST(cm_destroy_id_waits_for_ack, 20) {
    static int marker;
    struct held_event h;
    memset(&h, 0, sizeof h);
    h.ec = cm_channel();
    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(h.ec, &id, &marker, RDMA_PS_TCP));
    struct sockaddr_in sa = test_sockaddr(4791);
    CHECK_OK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000));
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, hold_event, &h));
    double end = now_ms() + TMO;
    while (!__atomic_load_n(&h.got, __ATOMIC_SEQ_CST) && now_ms() < end) msleep(1);
    CHECK(h.got, "the event thread got no event");
    CHECK_OK(rdma_destroy_id(id));
    double destroyed = now_ms();
    pthread_join(t, NULL);
    CHECK(h.ctx_seen == &marker, "event->id->context read by the event thread");
    CHECK(destroyed >= h.acked_ms, "rdma_destroy_id returned %.0f ms before the event was acknowledged",
          h.acked_ms - destroyed);
    rdma_destroy_event_channel(h.ec);
}

/*
 * The client's rdma_cm moves its QP to RTR and RTS when the REP arrives, in its own thread; the
 * consumer destroys the QP at that moment (a connect it gave up on). The QP must not be touched
 * after rdma_destroy_qp. Many rounds, so that the two meet (ASan reports a use after free).
 */
TEST(cm_destroy_qp_while_connecting, 120) {
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(lec, &listen);
    struct qp_opts o;
    qp_opts_default(&o);
    struct rdma_conn_param cp = race_param();
    int rounds = 0, est = 0;
    double end = now_ms() + 3000;
    while (now_ms() < end && rounds < 400) {
        struct rdma_cm_id *cid = cm_resolve(cec, test_addr(), port);
        struct ep a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        cm_ep_setup(&a, cid, cec, &o);
        CHECK_OK(rdma_connect(cid, &cp));
        struct rdma_cm_event *ev = cm_expect(lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
        struct rdma_cm_id *sid = ev->id;
        CHECK_OK(rdma_ack_cm_event(ev));
        cm_ep_setup(&b, sid, lec, &o);
        CHECK_OK(rdma_accept(sid, &cp)); /* REP on its way to the client's rdma_cm */
        ep_destroy(&a);                  /* meanwhile the client destroys its QP */
        ev = cm_next(cec, TMO);
        CHECK(ev != NULL, "no event for the client after the accept");
        if (ev->event == RDMA_CM_EVENT_ESTABLISHED) est++;
        CHECK_OK(rdma_ack_cm_event(ev));
        CHECK_OK(rdma_destroy_id(cid));
        ep_destroy(&b);
        CHECK_OK(rdma_destroy_id(sid));
        rounds++;
    }
    LOG("%d rounds, %d with the QP moved to RTS before it was destroyed", rounds, est);
    CHECK_OK(rdma_destroy_id(listen));
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(lec);
}

struct held_cq_event {
    struct ibv_comp_channel *ch;
    volatile int got;
    double acked_ms;
    void *ctx_seen;
};

static void *hold_cq_event(void *arg) {
    struct held_cq_event *h = arg;
    struct ibv_cq *cq;
    void *ctx;
    if (ibv_get_cq_event(h->ch, &cq, &ctx)) return NULL;
    __atomic_store_n(&h->got, 1, __ATOMIC_SEQ_CST);
    msleep(300);
    h->ctx_seen = cq->cq_context; /* still valid: the CQ cannot be gone before the ack */
    h->acked_ms = now_ms();
    ibv_ack_cq_events(cq, 1);
    return NULL;
}

/*
 * ibv_get_cq_event(3): "To avoid races, destroying a CQ will wait for all completion events to be
 * acknowledged." A thread that got a completion event may use the CQ until it acks; destroying the
 * CQ from another thread meanwhile freed it under that thread (its ibv_ack_cq_events then read
 * freed memory).
 */
TEST(cq_destroy_waits_for_event_ack, 20) {
    struct qp_opts o;
    qp_opts_default(&o);
    o.with_channel = 1;
    struct pair p;
    pair_open(&p, CONN_VERBS, &o);
    uint8_t *a = xalloc(4096), *b = xalloc(4096);
    struct ibv_mr *amr = reg(p.a.pd, a, 4096, LW), *bmr = reg(p.b.pd, b, 4096, LW);
    CHECK_OK(ibv_req_notify_cq(p.b.rcq, 0));
    struct held_cq_event h;
    memset(&h, 0, sizeof h);
    h.ch = p.b.ch;
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, hold_cq_event, &h));
    post_recv(p.b.qp, 1, b, 64, bmr->lkey);
    post_send(p.a.qp, 2, IBV_WR_SEND, a, 64, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(p.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, p.b.qp->qp_num, 64, 0, 0);
    wc = wait_wc(p.a.scq, TMO);
    double end = now_ms() + TMO;
    while (!__atomic_load_n(&h.got, __ATOMIC_SEQ_CST) && now_ms() < end) msleep(1);
    CHECK(h.got, "no completion event");
    CHECK_OK(ibv_destroy_qp(p.b.qp));
    p.b.qp = NULL;
    CHECK_OK(ibv_destroy_cq(p.b.rcq));
    double destroyed = now_ms();
    p.b.rcq = NULL;
    pthread_join(t, NULL);
    CHECK(h.ctx_seen == &p.b, "cq->cq_context read by the event thread");
    CHECK(destroyed >= h.acked_ms, "ibv_destroy_cq returned %.0f ms before the event was acknowledged",
          h.acked_ms - destroyed);
    pair_close(&p);
}

/* a QP on an SRQ moved to ERR: IBV_EVENT_QP_LAST_WQE_REACHED (IBA 11.6.3); 0 if none within 2 s */
struct lastwqe {
    struct dev d;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_srq *srq;
    struct ibv_qp *qp;
};

static int lastwqe_open(struct lastwqe *l, void *qp_context) {
    memset(l, 0, sizeof *l);
    dev_open(&l->d);
    l->pd = CHECK_PTR(ibv_alloc_pd(l->d.ctx));
    l->cq = CHECK_PTR(ibv_create_cq(l->d.ctx, 4, NULL, NULL, 0));
    struct ibv_srq_init_attr sa;
    memset(&sa, 0, sizeof sa);
    sa.attr.max_wr = 4;
    sa.attr.max_sge = 1;
    l->srq = CHECK_PTR(ibv_create_srq(l->pd, &sa));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.qp_context = qp_context;
    ia.send_cq = ia.recv_cq = l->cq;
    ia.srq = l->srq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = 1;
    ia.cap.max_send_sge = 1;
    l->qp = CHECK_PTR(ibv_create_qp(l->pd, &ia));
    qp_to_init(l->qp, l->d.port);
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_ERR;
    CHECK_OK(ibv_modify_qp(l->qp, &a, IBV_QP_STATE));
    return fd_readable(l->d.ctx->async_fd, 2000);
}

static void lastwqe_close(struct lastwqe *l) {
    if (l->qp) CHECK_OK(ibv_destroy_qp(l->qp));
    CHECK_OK(ibv_destroy_srq(l->srq));
    CHECK_OK(ibv_destroy_cq(l->cq));
    CHECK_OK(ibv_dealloc_pd(l->pd));
    dev_close(&l->d);
}

/*
 * ibv_get_async_event(3): destroying an object "avoids an application retrieving an affiliated
 * event after the corresponding object has already been destroyed". An unread event of a
 * destroyed QP used to stay queued and named the freed QP.
 */
TEST(async_event_goes_with_its_qp, 20) {
    static int marker;
    struct lastwqe l;
    if (!lastwqe_open(&l, &marker)) {
        lastwqe_close(&l);
        SKIP("no IBV_EVENT_QP_LAST_WQE_REACHED for a QP on an SRQ entering ERR");
    }
    CHECK_OK(ibv_destroy_qp(l.qp));
    l.qp = NULL;
    if (fd_readable(l.d.ctx->async_fd, 50)) {
        struct ibv_async_event ev;
        CHECK_OK(ibv_get_async_event(l.d.ctx, &ev));
        LOG("left: %s, qp %p (context %p)", ibv_event_type_str(ev.event_type), (void *)ev.element.qp,
            ev.element.qp->qp_context);
        FAIL("async event %s of a destroyed QP still delivered", ibv_event_type_str(ev.event_type));
    }
    lastwqe_close(&l);
}

struct held_async {
    struct ibv_context *ctx;
    volatile int got;
    double acked_ms;
    void *ctx_seen;
};

static void *hold_async(void *arg) {
    struct held_async *h = arg;
    struct ibv_async_event ev;
    if (ibv_get_async_event(h->ctx, &ev)) return NULL;
    __atomic_store_n(&h->got, 1, __ATOMIC_SEQ_CST);
    msleep(300);
    h->ctx_seen = ev.element.qp->qp_context; /* still valid: the QP cannot be gone before the ack */
    h->acked_ms = now_ms();
    ibv_ack_async_event(&ev);
    return NULL;
}

/* ibv_get_async_event(3): "destroying an object (CQ, SRQ or QP) will wait for all affiliated events
 * for the object to be acknowledged" */
TEST(qp_destroy_waits_for_async_ack, 20) {
    static int marker;
    struct lastwqe l;
    if (!lastwqe_open(&l, &marker)) {
        lastwqe_close(&l);
        SKIP("no IBV_EVENT_QP_LAST_WQE_REACHED for a QP on an SRQ entering ERR");
    }
    struct held_async h;
    memset(&h, 0, sizeof h);
    h.ctx = l.d.ctx;
    pthread_t t;
    CHECK_OK(pthread_create(&t, NULL, hold_async, &h));
    double end = now_ms() + TMO;
    while (!__atomic_load_n(&h.got, __ATOMIC_SEQ_CST) && now_ms() < end) msleep(1);
    CHECK(h.got, "the event thread got no async event");
    CHECK_OK(ibv_destroy_qp(l.qp));
    double destroyed = now_ms();
    l.qp = NULL;
    pthread_join(t, NULL);
    CHECK(h.ctx_seen == &marker, "qp_context read by the event thread");
    CHECK(destroyed >= h.acked_ms, "ibv_destroy_qp returned %.0f ms before the event was acknowledged",
          h.acked_ms - destroyed);
    lastwqe_close(&l);
}
