/* 6. rdma_cm: private data, accept/reject, unreachable, disconnect, migrate, bind, getaddrinfo */
#include <netdb.h>

#include "common.h"

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE

struct cmsetup {
    struct rdma_event_channel *lec, *cec;
    struct rdma_cm_id *listen, *cid, *sid;
    struct ep a, b;
    uint16_t port;
    struct qp_opts o;
};

/* listener + resolved client with a QP; not connected yet */
static void cm_prepare(struct cmsetup *s) {
    memset(s, 0, sizeof *s);
    qp_opts_default(&s->o);
    s->lec = cm_channel();
    s->cec = cm_channel();
    s->port = cm_listen(s->lec, &s->listen);
    s->cid = cm_resolve(s->cec, test_addr(), s->port);
    cm_ep_setup(&s->a, s->cid, s->cec, &s->o);
}

static void cm_teardown(struct cmsetup *s) {
    ep_destroy(&s->a);
    ep_destroy(&s->b);
    if (s->sid) CHECK_OK(rdma_destroy_id(s->sid));
    if (s->cid) CHECK_OK(rdma_destroy_id(s->cid));
    if (s->listen) CHECK_OK(rdma_destroy_id(s->listen));
    rdma_destroy_event_channel(s->cec);
    rdma_destroy_event_channel(s->lec);
}

static struct rdma_conn_param conn_param(const void *pd, uint8_t len) {
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.private_data = pd;
    cp.private_data_len = len;
    cp.responder_resources = 1;
    cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    return cp;
}

static void check_pdata(const struct rdma_cm_event *ev, const uint8_t *want, int len, const char *what) {
    CHECK(ev->param.conn.private_data != NULL, "%s: private_data NULL", what);
    CHECK(ev->param.conn.private_data_len >= len, "%s: private_data_len %d < %d", what, ev->param.conn.private_data_len, len);
    CHECK(!memcmp(ev->param.conn.private_data, want, len), "%s: private data differs", what);
}

/* connect with 56 bytes of private data, accept with private data; both delivered */
TEST(cm_private_data, 30) {
    struct cmsetup s;
    cm_prepare(&s);
    uint8_t req[56], rep[64];
    fill_pattern(req, sizeof req, 56);
    fill_pattern(rep, sizeof rep, 64);
    struct rdma_conn_param cp = conn_param(req, sizeof req);
    CHECK_OK(rdma_connect(s.cid, &cp));
    struct rdma_cm_event *ev = cm_expect(s.lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    CHECK_EQ(ev->status, 0);
    CHECK(ev->listen_id == s.listen, "listen_id");
    CHECK(ev->id != s.listen && ev->id->verbs != NULL, "new id with verbs");
    check_pdata(ev, req, sizeof req, "CONNECT_REQUEST");
    CHECK(ev->param.conn.initiator_depth >= 1 || ev->param.conn.responder_resources >= 1, "rd atomic params passed");
    s.sid = ev->id;
    /* the new id knows both addresses */
    struct sockaddr_in *la = (struct sockaddr_in *)rdma_get_local_addr(s.sid);
    struct sockaddr_in *pa = (struct sockaddr_in *)rdma_get_peer_addr(s.sid);
    struct sockaddr_in want = test_sockaddr(s.port);
    CHECK(la->sin_family == AF_INET && la->sin_addr.s_addr == want.sin_addr.s_addr, "local addr of the accepted id");
    CHECK(ntohs(rdma_get_src_port(s.sid)) == s.port, "src port of the accepted id %u", ntohs(rdma_get_src_port(s.sid)));
    CHECK(pa->sin_family == AF_INET && pa->sin_addr.s_addr == want.sin_addr.s_addr, "peer addr");
    CHECK(rdma_get_dst_port(s.sid) == rdma_get_src_port(s.cid), "dst port of the accepted id == client's src port");
    CHECK_OK(rdma_ack_cm_event(ev));
    cm_ep_setup(&s.b, s.sid, s.lec, &s.o);
    cp = conn_param(rep, sizeof rep);
    CHECK_OK(rdma_accept(s.sid, &cp));
    ev = cm_expect(s.cec, RDMA_CM_EVENT_ESTABLISHED, TMO);
    CHECK(ev->id == s.cid, "ESTABLISHED id");
    CHECK_EQ(ev->status, 0);
    check_pdata(ev, rep, sizeof rep, "ESTABLISHED");
    CHECK_OK(rdma_ack_cm_event(ev));
    ev = cm_expect(s.lec, RDMA_CM_EVENT_ESTABLISHED, TMO);
    CHECK(ev->id == s.sid, "server ESTABLISHED id");
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK(ntohs(rdma_get_dst_port(s.cid)) == s.port, "client dst port");
    /* data flows */
    uint8_t *a = xalloc(4096), *b = xalloc(4096);
    struct ibv_mr *amr = reg(s.a.pd, a, 4096, LW), *bmr = reg(s.b.pd, b, 4096, LW);
    post_recv(s.b.qp, 1, b, 4096, bmr->lkey);
    fill_pattern(a, 100, 3);
    post_send(s.a.qp, 2, IBV_WR_SEND, a, 100, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(s.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, s.b.qp->qp_num, 100, 0, 0);
    CHECK(check_pattern(b, 100, 3), "data");
    wc = wait_wc(s.a.scq, TMO);
    CHECK_OK(rdma_disconnect(s.cid));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.lec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    rdma_disconnect(s.sid);
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.cec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    cm_teardown(&s);
}

TEST(cm_reject, 30) {
    struct cmsetup s;
    cm_prepare(&s);
    uint8_t req[20], rej[32];
    fill_pattern(req, sizeof req, 1);
    fill_pattern(rej, sizeof rej, 2);
    struct rdma_conn_param cp = conn_param(req, sizeof req);
    CHECK_OK(rdma_connect(s.cid, &cp));
    struct rdma_cm_event *ev = cm_expect(s.lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    check_pdata(ev, req, sizeof req, "CONNECT_REQUEST");
    struct rdma_cm_id *sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_reject(sid, rej, sizeof rej));
    ev = cm_expect(s.cec, RDMA_CM_EVENT_REJECTED, TMO);
    CHECK(ev->id == s.cid, "REJECTED id");
    CHECK(ev->status != 0, "REJECTED status %d", ev->status);
    LOG("REJECTED status %d (kernel RoCE: 28 = consumer reject)", ev->status);
    check_pdata(ev, rej, sizeof rej, "REJECTED");
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_destroy_id(sid));
    CHECK(!fd_readable(s.lec->fd, 100), "unexpected event on the listener channel");
    cm_teardown(&s);
}

/* connect to a port nobody listens on: an error event (UNREACHABLE or REJECTED), never ESTABLISHED */
TEST(cm_no_listener, 30) {
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *tmp;
    uint16_t port = cm_listen(ec, &tmp);
    CHECK_OK(rdma_destroy_id(tmp)); /* port now free */
    struct cmsetup s;
    memset(&s, 0, sizeof s);
    qp_opts_default(&s.o);
    s.cid = cm_resolve(ec, test_addr(), port);
    cm_ep_setup(&s.a, s.cid, ec, &s.o);
    struct rdma_conn_param cp = conn_param(NULL, 0);
    double t0 = now_ms();
    CHECK_OK(rdma_connect(s.cid, &cp));
    struct rdma_cm_event *ev = cm_next(ec, 5000);
    CHECK(ev != NULL, "no event within 5 s after connecting to a port without listener");
    CHECK(ev->event == RDMA_CM_EVENT_REJECTED || ev->event == RDMA_CM_EVENT_UNREACHABLE ||
              ev->event == RDMA_CM_EVENT_CONNECT_ERROR,
          "event %s status %d", rdma_event_str(ev->event), ev->status);
    LOG("%s status %d after %.0f ms", rdma_event_str(ev->event), ev->status, now_ms() - t0);
    CHECK_OK(rdma_ack_cm_event(ev));
    ep_destroy(&s.a);
    CHECK_OK(rdma_destroy_id(s.cid));
    rdma_destroy_event_channel(ec);
}

static void connect_pair(struct cmsetup *s) {
    struct rdma_conn_param cp = conn_param(NULL, 0);
    CHECK_OK(rdma_connect(s->cid, &cp));
    struct rdma_cm_event *ev = cm_expect(s->lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    s->sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    cm_ep_setup(&s->b, s->sid, s->lec, &s->o);
    CHECK_OK(rdma_accept(s->sid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s->cec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s->lec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
}

/* disconnect from one side: DISCONNECTED on both; after both rdma_disconnect the posted receives flush */
static void disconnect_test(int from_server) {
    struct cmsetup s;
    cm_prepare(&s);
    connect_pair(&s);
    uint8_t *a = xalloc(4096), *b = xalloc(4096);
    struct ibv_mr *amr = reg(s.a.pd, a, 4096, LW), *bmr = reg(s.b.pd, b, 4096, LW);
    post_recv(s.a.qp, 1, a, 64, amr->lkey);
    post_recv(s.b.qp, 2, b, 64, bmr->lkey);
    struct rdma_cm_id *first = from_server ? s.sid : s.cid, *second = from_server ? s.cid : s.sid;
    struct rdma_event_channel *fch = from_server ? s.lec : s.cec, *sch = from_server ? s.cec : s.lec;
    CHECK_OK(rdma_disconnect(first));
    struct rdma_cm_event *ev = cm_expect(sch, RDMA_CM_EVENT_DISCONNECTED, TMO);
    CHECK(ev->id == second, "DISCONNECTED id (passive side)");
    CHECK_OK(rdma_ack_cm_event(ev));
    rdma_disconnect(second); /* the usual reply; may fail harmlessly */
    ev = cm_expect(fch, RDMA_CM_EVENT_DISCONNECTED, TMO);
    CHECK(ev->id == first, "DISCONNECTED id (active side)");
    CHECK_OK(rdma_ack_cm_event(ev));
    struct ibv_wc wc = wait_wc(s.a.rcq, TMO);
    check_wc_err(&wc, 1, IBV_WC_WR_FLUSH_ERR, s.a.qp->qp_num);
    wc = wait_wc(s.b.rcq, TMO);
    check_wc_err(&wc, 2, IBV_WC_WR_FLUSH_ERR, s.b.qp->qp_num);
    CHECK_EQ(qp_state(s.a.qp), IBV_QPS_ERR);
    CHECK_EQ(qp_state(s.b.qp), IBV_QPS_ERR);
    CHECK(!fd_readable(s.cec->fd, 50) && !fd_readable(s.lec->fd, 0), "extra cm events");
    cm_teardown(&s);
}

TEST(cm_disconnect_from_client, 30) { disconnect_test(0); }
TEST(cm_disconnect_from_server, 30) { disconnect_test(1); }

TEST(cm_migrate_id, 30) {
    struct cmsetup s;
    cm_prepare(&s);
    connect_pair(&s);
    struct rdma_event_channel *ec2 = cm_channel();
    CHECK_OK(rdma_migrate_id(s.sid, ec2));
    CHECK(s.sid->channel == ec2, "id->channel after migrate");
    CHECK_OK(rdma_disconnect(s.cid));
    struct rdma_cm_event *ev = cm_expect(ec2, RDMA_CM_EVENT_DISCONNECTED, TMO);
    CHECK(ev->id == s.sid, "id");
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK(!fd_readable(s.lec->fd, 100), "event delivered to the old channel after migrate");
    rdma_disconnect(s.sid);
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.cec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    /* migrate the listener too; a new connection request arrives on the new channel */
    struct rdma_event_channel *ec3 = cm_channel();
    CHECK_OK(rdma_migrate_id(s.listen, ec3));
    struct rdma_cm_id *c2 = cm_resolve(s.cec, test_addr(), s.port);
    struct ep a2;
    memset(&a2, 0, sizeof a2);
    cm_ep_setup(&a2, c2, s.cec, &s.o);
    struct rdma_conn_param cp = conn_param(NULL, 0);
    CHECK_OK(rdma_connect(c2, &cp));
    ev = cm_expect(ec3, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    struct rdma_cm_id *s2 = ev->id;
    CHECK(s2->channel == ec3, "new id inherits the listener's channel");
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_reject(s2, NULL, 0));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.cec, RDMA_CM_EVENT_REJECTED, TMO)));
    CHECK_OK(rdma_destroy_id(s2));
    ep_destroy(&a2);
    CHECK_OK(rdma_destroy_id(c2));
    CHECK(!fd_readable(s.lec->fd, 0), "old listener channel has events");
    ep_destroy(&s.b);
    CHECK_OK(rdma_destroy_id(s.sid));
    s.sid = NULL;
    CHECK_OK(rdma_destroy_id(s.listen));
    s.listen = NULL;
    rdma_destroy_event_channel(ec2);
    rdma_destroy_event_channel(ec3);
    cm_teardown(&s);
}

TEST(cm_bind, 30) {
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *id1, *id2, *id3;
    CHECK_OK(rdma_create_id(ec, &id1, NULL, RDMA_PS_TCP));
    CHECK_OK(rdma_create_id(ec, &id2, NULL, RDMA_PS_TCP));
    CHECK_OK(rdma_create_id(ec, &id3, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa = test_sockaddr(0);
    CHECK_OK(rdma_bind_addr(id1, (struct sockaddr *)&sa));
    uint16_t p1 = ntohs(rdma_get_src_port(id1));
    CHECK(p1 != 0, "ephemeral port reported after bind");
    struct sockaddr_in *la = (struct sockaddr_in *)rdma_get_local_addr(id1);
    CHECK(la->sin_family == AF_INET && la->sin_addr.s_addr == sa.sin_addr.s_addr && ntohs(la->sin_port) == p1,
          "rdma_get_local_addr");
    CHECK_OK(rdma_listen(id1, 4));
    CHECK_EQ(ntohs(rdma_get_src_port(id1)), p1);
    /* second id on port 0: a different ephemeral port */
    CHECK_OK(rdma_bind_addr(id3, (struct sockaddr *)&sa));
    uint16_t p3 = ntohs(rdma_get_src_port(id3));
    CHECK(p3 != 0 && p3 != p1, "second ephemeral port %u (first %u)", p3, p1);
    /* same address and port again: EADDRINUSE */
    struct sockaddr_in sb = test_sockaddr(p1);
    errno = 0;
    int rc = rdma_bind_addr(id2, (struct sockaddr *)&sb);
    CHECK(rc == -1 && errno == EADDRINUSE, "bind to a port in use: rc %d errno %d (%s)", rc, errno, strerror(errno));
    CHECK_OK(rdma_destroy_id(id1));
    CHECK_OK(rdma_destroy_id(id2));
    /* after the owner is gone, the port can be bound again */
    CHECK_OK(rdma_create_id(ec, &id2, NULL, RDMA_PS_TCP));
    CHECK_OK(rdma_bind_addr(id2, (struct sockaddr *)&sb));
    CHECK_EQ(ntohs(rdma_get_src_port(id2)), p1);
    CHECK_OK(rdma_destroy_id(id2));
    CHECK_OK(rdma_destroy_id(id3));
    rdma_destroy_event_channel(ec);
}

TEST(cm_event_str, 10) {
    static const struct {
        enum rdma_cm_event_type t;
        const char *s;
    } tab[] = {
        {RDMA_CM_EVENT_ADDR_RESOLVED, "RDMA_CM_EVENT_ADDR_RESOLVED"},
        {RDMA_CM_EVENT_ADDR_ERROR, "RDMA_CM_EVENT_ADDR_ERROR"},
        {RDMA_CM_EVENT_ROUTE_RESOLVED, "RDMA_CM_EVENT_ROUTE_RESOLVED"},
        {RDMA_CM_EVENT_ROUTE_ERROR, "RDMA_CM_EVENT_ROUTE_ERROR"},
        {RDMA_CM_EVENT_CONNECT_REQUEST, "RDMA_CM_EVENT_CONNECT_REQUEST"},
        {RDMA_CM_EVENT_CONNECT_RESPONSE, "RDMA_CM_EVENT_CONNECT_RESPONSE"},
        {RDMA_CM_EVENT_CONNECT_ERROR, "RDMA_CM_EVENT_CONNECT_ERROR"},
        {RDMA_CM_EVENT_UNREACHABLE, "RDMA_CM_EVENT_UNREACHABLE"},
        {RDMA_CM_EVENT_REJECTED, "RDMA_CM_EVENT_REJECTED"},
        {RDMA_CM_EVENT_ESTABLISHED, "RDMA_CM_EVENT_ESTABLISHED"},
        {RDMA_CM_EVENT_DISCONNECTED, "RDMA_CM_EVENT_DISCONNECTED"},
        {RDMA_CM_EVENT_DEVICE_REMOVAL, "RDMA_CM_EVENT_DEVICE_REMOVAL"},
        {RDMA_CM_EVENT_MULTICAST_JOIN, "RDMA_CM_EVENT_MULTICAST_JOIN"},
        {RDMA_CM_EVENT_MULTICAST_ERROR, "RDMA_CM_EVENT_MULTICAST_ERROR"},
        {RDMA_CM_EVENT_ADDR_CHANGE, "RDMA_CM_EVENT_ADDR_CHANGE"},
        {RDMA_CM_EVENT_TIMEWAIT_EXIT, "RDMA_CM_EVENT_TIMEWAIT_EXIT"},
    };
    for (unsigned i = 0; i < sizeof tab / sizeof *tab; i++) {
        const char *s = rdma_event_str(tab[i].t);
        CHECK(s && !strcmp(s, tab[i].s), "rdma_event_str(%d) = '%s', expected '%s'", tab[i].t, s ? s : "(null)", tab[i].s);
    }
    const char *u = rdma_event_str((enum rdma_cm_event_type)1000);
    CHECK(u && !strcmp(u, "UNKNOWN EVENT"), "unknown event string '%s'", u ? u : "(null)");
}

TEST(cm_getaddrinfo, 20) {
    sr_used_cm = 1;
    struct rdma_addrinfo hints, *res = NULL;
    memset(&hints, 0, sizeof hints);
    hints.ai_flags = RAI_NUMERICHOST;
    hints.ai_port_space = RDMA_PS_TCP;
    hints.ai_qp_type = IBV_QPT_RC;
    int rc = rdma_getaddrinfo(test_addr(), "7471", &hints, &res);
    CHECK(rc == 0 && res, "rdma_getaddrinfo(%s, 7471): rc %d errno %d", test_addr(), rc, errno);
    CHECK_EQ(res->ai_family, AF_INET);
    CHECK_EQ(res->ai_port_space, RDMA_PS_TCP);
    CHECK(res->ai_qp_type == IBV_QPT_RC, "ai_qp_type %d", res->ai_qp_type);
    CHECK(res->ai_dst_addr && res->ai_dst_len == sizeof(struct sockaddr_in), "dst addr len %u", res->ai_dst_len);
    struct sockaddr_in want = test_sockaddr(7471), *d = (struct sockaddr_in *)res->ai_dst_addr;
    CHECK(d->sin_family == AF_INET && d->sin_addr.s_addr == want.sin_addr.s_addr && d->sin_port == htons(7471),
          "dst addr");
    rdma_freeaddrinfo(res);
    /* passive: source address filled */
    res = NULL;
    hints.ai_flags = RAI_NUMERICHOST | RAI_PASSIVE;
    rc = rdma_getaddrinfo(test_addr(), "7472", &hints, &res);
    CHECK(rc == 0 && res, "passive rdma_getaddrinfo rc %d", rc);
    CHECK(res->ai_src_addr && res->ai_src_len == sizeof(struct sockaddr_in), "src addr");
    struct sockaddr_in *sa = (struct sockaddr_in *)res->ai_src_addr;
    CHECK(sa->sin_addr.s_addr == want.sin_addr.s_addr && sa->sin_port == htons(7472), "passive src addr");
    rdma_freeaddrinfo(res);
    /* a bad numeric host fails */
    res = NULL;
    hints.ai_flags = RAI_NUMERICHOST;
    rc = rdma_getaddrinfo("not-an-address", "1", &hints, &res);
    CHECK(rc != 0, "rdma_getaddrinfo of a non-numeric host with RAI_NUMERICHOST succeeded");
}

/* a listener survives many connect/disconnect cycles */
TEST(cm_many_connections, 60) {
    struct cmsetup s;
    cm_prepare(&s);
    ep_destroy(&s.a);
    CHECK_OK(rdma_destroy_id(s.cid));
    s.cid = NULL;
    for (int i = 0; i < 20; i++) {
        struct rdma_cm_id *c = cm_resolve(s.cec, test_addr(), s.port);
        struct ep a, b;
        memset(&a, 0, sizeof a);
        memset(&b, 0, sizeof b);
        cm_ep_setup(&a, c, s.cec, &s.o);
        struct rdma_conn_param cp = conn_param(&i, sizeof i);
        CHECK_OK(rdma_connect(c, &cp));
        struct rdma_cm_event *ev = cm_expect(s.lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
        check_pdata(ev, (uint8_t *)&i, sizeof i, "request");
        struct rdma_cm_id *sid = ev->id;
        CHECK_OK(rdma_ack_cm_event(ev));
        cm_ep_setup(&b, sid, s.lec, &s.o);
        CHECK_OK(rdma_accept(sid, &cp));
        CHECK_OK(rdma_ack_cm_event(cm_expect(s.cec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
        CHECK_OK(rdma_ack_cm_event(cm_expect(s.lec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
        CHECK_OK(rdma_disconnect(i % 2 ? sid : c));
        CHECK_OK(rdma_ack_cm_event(cm_expect(i % 2 ? s.cec : s.lec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
        rdma_disconnect(i % 2 ? c : sid);
        CHECK_OK(rdma_ack_cm_event(cm_expect(i % 2 ? s.lec : s.cec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
        ep_destroy(&a);
        ep_destroy(&b);
        CHECK_OK(rdma_destroy_id(c));
        CHECK_OK(rdma_destroy_id(sid));
    }
    cm_teardown(&s);
}

/* graceful close: a SEND the peer has received completes successfully at the sender even when the
 * receiver disconnects right after polling it; a peer's disconnect leaves the local QP as it is until
 * the local rdma_disconnect (rdma_cm does not touch user QPs on a DREQ) */
TEST(cm_disconnect_after_delivery, 30) {
    struct cmsetup s;
    cm_prepare(&s);
    connect_pair(&s);
    uint8_t *a = xalloc(4096), *b = xalloc(4096);
    struct ibv_mr *amr = reg(s.a.pd, a, 4096, LW), *bmr = reg(s.b.pd, b, 4096, LW);
    post_recv(s.b.qp, 1, b, 64, bmr->lkey);
    post_recv(s.a.qp, 9, a + 2048, 64, amr->lkey);
    post_send(s.a.qp, 2, IBV_WR_SEND, a, 8, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(s.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, s.b.qp->qp_num, 8, 0, 0);
    CHECK_OK(rdma_disconnect(s.sid)); /* the receiver closes immediately */
    wc = wait_wc(s.a.scq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_SEND, s.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.cec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    /* the client has not called rdma_disconnect: its QP is still RTS, its receive not flushed */
    CHECK_EQ(qp_state(s.a.qp), IBV_QPS_RTS);
    expect_no_wc(s.a.rcq, 50);
    rdma_disconnect(s.cid);
    wc = wait_wc(s.a.rcq, TMO);
    check_wc_err(&wc, 9, IBV_WC_WR_FLUSH_ERR, s.a.qp->qp_num);
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.lec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    cm_teardown(&s);
}

static void query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a) {
    struct ibv_qp_init_attr init;
    CHECK_OK(ibv_query_qp(qp, a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
                          IBV_QP_RNR_RETRY | IBV_QP_MIN_RNR_TIMER, &init));
}

/*
 * The settings a consumer gives rdma_cm reach the QPs as ib_cm negotiates them: the requester's TOS as both
 * GRH traffic classes (the passive side's path is the REQ's), each side's own RDMA_OPTION_ID_ACK_TIMEOUT, the
 * requester's retry_count on both, each side's rnr_retry_count on its peer's QP (the REQ's tells the passive side
 * how often to retry, the REP's the active side; seen on kernel rxe 6.1), and min_rnr_timer changed RTS to RTS.
 * Out-of-range option lengths are refused as the kernel's ucma does.
 */
TEST(cm_qp_settings, 30) {
    struct cmsetup s;
    memset(&s, 0, sizeof s);
    qp_opts_default(&s.o);
    s.lec = cm_channel();
    s.cec = cm_channel();
    s.port = cm_listen(s.lec, &s.listen);
    CHECK_OK(rdma_create_id(s.cec, &s.cid, NULL, RDMA_PS_TCP));
    uint8_t tos = 104, client_timeout = 18, server_timeout = 16;
    int wide = 104;
    CHECK(rdma_set_option(s.cid, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &wide, sizeof wide) == -1 && errno == EINVAL,
          "a TOS of sizeof(int) is refused (the option is a uint8_t)");
    CHECK_OK(rdma_set_option(s.cid, RDMA_OPTION_ID, RDMA_OPTION_ID_TOS, &tos, sizeof tos));
    CHECK_OK(rdma_set_option(s.cid, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &client_timeout, 1));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(s.port);
    CHECK(inet_pton(AF_INET, test_addr(), &sa.sin_addr) == 1, "address");
    CHECK_OK(rdma_resolve_addr(s.cid, NULL, (struct sockaddr *)&sa, 2000));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.cec, RDMA_CM_EVENT_ADDR_RESOLVED, TMO)));
    CHECK_OK(rdma_resolve_route(s.cid, 2000));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.cec, RDMA_CM_EVENT_ROUTE_RESOLVED, TMO)));
    cm_ep_setup(&s.a, s.cid, s.cec, &s.o);

    struct rdma_conn_param cp = conn_param(NULL, 0);
    cp.retry_count = 5;
    cp.rnr_retry_count = 3;
    CHECK_OK(rdma_connect(s.cid, &cp));
    struct rdma_cm_event *ev = cm_expect(s.lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    s.sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    cm_ep_setup(&s.b, s.sid, s.lec, &s.o);
    CHECK_OK(rdma_set_option(s.sid, RDMA_OPTION_ID, RDMA_OPTION_ID_ACK_TIMEOUT, &server_timeout, 1));
    cp.retry_count = 2;
    cp.rnr_retry_count = 4;
    CHECK_OK(rdma_accept(s.sid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.cec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.lec, RDMA_CM_EVENT_ESTABLISHED, TMO)));

    struct ibv_qp_attr m = { .qp_state = IBV_QPS_RTS, .min_rnr_timer = 20 };
    CHECK_OK(ibv_modify_qp(s.a.qp, &m, IBV_QP_STATE | IBV_QP_MIN_RNR_TIMER));
    m.min_rnr_timer = 12;
    CHECK_OK(ibv_modify_qp(s.b.qp, &m, IBV_QP_MIN_RNR_TIMER));
    struct ibv_qp_attr bad = { .qp_state = IBV_QPS_RTS, .path_mtu = IBV_MTU_1024 };
    CHECK(ibv_modify_qp(s.a.qp, &bad, IBV_QP_STATE | IBV_QP_PATH_MTU) == EINVAL,
          "RTS to RTS may not change the path MTU (IBA 11.2.4.2)");

    struct ibv_qp_attr a, b;
    query_qp(s.a.qp, &a);
    query_qp(s.b.qp, &b);
    CHECK_EQ(a.ah_attr.grh.traffic_class, 104);
    CHECK_EQ(b.ah_attr.grh.traffic_class, 104);
    CHECK_EQ(a.timeout, 18);
    CHECK_EQ(b.timeout, 16);
    CHECK_EQ(a.retry_cnt, 5);
    CHECK_EQ(b.retry_cnt, 5);
    CHECK_EQ(a.rnr_retry, 4);
    CHECK_EQ(b.rnr_retry, 3);
    CHECK_EQ(a.min_rnr_timer, 20);
    CHECK_EQ(b.min_rnr_timer, 12);
    CHECK_EQ(a.qp_state, IBV_QPS_RTS);
    cm_teardown(&s);
}

/* a QP of the consumer's own (ibv_create_qp on the id's device), not rdma_cm's */
static void own_ep(struct ep *e, struct rdma_cm_id *id, struct rdma_event_channel *ec) {
    memset(e, 0, sizeof *e);
    e->id = id;
    e->ec = ec;
    e->ctx = CHECK_PTR(id->verbs);
    e->pd = CHECK_PTR(ibv_alloc_pd(e->ctx));
    e->scq = CHECK_PTR(ibv_create_cq(e->ctx, 16, e, NULL, 0));
    e->rcq = CHECK_PTR(ibv_create_cq(e->ctx, 16, e, NULL, 0));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = e->scq;
    ia.recv_cq = e->rcq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = 8;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    e->qp = CHECK_PTR(ibv_create_qp(e->pd, &ia));
    CHECK_EQ(qp_state(e->qp), IBV_QPS_RESET);
}

/* INIT, RTR (path MTU and SL replaced), RTS with rdma_cm's attributes, as rping -q does */
static void own_qp_to_rts(struct rdma_cm_id *id, struct ibv_qp *qp, enum ibv_mtu mtu, uint8_t sl) {
    enum ibv_qp_state states[] = {IBV_QPS_INIT, IBV_QPS_RTR, IBV_QPS_RTS};
    for (int i = 0; i < 3; i++) {
        struct ibv_qp_attr a;
        int mask = 0;
        memset(&a, 0, sizeof a);
        a.qp_state = states[i];
        CHECK_OK(rdma_init_qp_attr(id, &a, &mask));
        CHECK(mask & IBV_QP_STATE, "rdma_init_qp_attr(%d) sets IBV_QP_STATE", states[i]);
        if (states[i] == IBV_QPS_RTR) {
            CHECK(mask & IBV_QP_PATH_MTU, "rdma_init_qp_attr(RTR) sets the path MTU");
            CHECK(a.path_mtu >= mtu, "rdma_cm's path MTU %d is not below the cap %d", a.path_mtu, mtu);
            a.path_mtu = mtu;
            a.ah_attr.sl = sl;
        }
        CHECK_OK(ibv_modify_qp(qp, &a, mask));
    }
}

/*
 * rping's -q mode: both sides drive QPs of their own. The server moves its QP to RTS before rdma_accept (which
 * announces its qp_num), the client gets CONNECT_RESPONSE instead of ESTABLISHED (its id has no QP), moves its QP
 * to RTS and calls rdma_establish; rdma_cm then reports nothing more to the client and ESTABLISHED to the server.
 * The capped path MTU and (where the device keeps it) the SL read back on both; a SEND each way arrives (the PSNs rdma_init_qp_attr gave
 * both sides before the REP and after it agree).
 */
TEST(cm_own_qp, 30) {
    struct cmsetup s;
    memset(&s, 0, sizeof s);
    s.lec = cm_channel();
    s.cec = cm_channel();
    s.port = cm_listen(s.lec, &s.listen);
    s.cid = cm_resolve(s.cec, test_addr(), s.port);
    own_ep(&s.a, s.cid, s.cec);
    uint8_t req[8] = "request", rep[8] = "reply!!";
    struct rdma_conn_param cp = conn_param(req, sizeof req);
    cp.qp_num = s.a.qp->qp_num;
    CHECK_OK(rdma_connect(s.cid, &cp));
    struct rdma_cm_event *ev = cm_expect(s.lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    s.sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    own_ep(&s.b, s.sid, s.lec);
    own_qp_to_rts(s.sid, s.b.qp, IBV_MTU_512, 3);
    struct rdma_conn_param ap = conn_param(rep, sizeof rep);
    ap.qp_num = s.b.qp->qp_num;
    CHECK_OK(rdma_accept(s.sid, &ap));
    ev = cm_expect(s.cec, RDMA_CM_EVENT_CONNECT_RESPONSE, TMO);
    check_pdata(ev, rep, sizeof rep, "CONNECT_RESPONSE");
    CHECK_OK(rdma_ack_cm_event(ev));
    own_qp_to_rts(s.cid, s.a.qp, IBV_MTU_512, 3);
    CHECK_OK(rdma_establish(s.cid));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.lec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    CHECK(cm_next(s.cec, 100) == NULL, "no event follows rdma_establish on the client");

    struct ibv_qp_attr qa[2];
    for (int i = 0; i < 2; i++) {
        struct ibv_qp_init_attr init;
        CHECK_OK(ibv_query_qp(i ? s.b.qp : s.a.qp, &qa[i], IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                              IBV_QP_DEST_QPN, &init));
        CHECK_EQ(qa[i].qp_state, IBV_QPS_RTS);
        CHECK_EQ(qa[i].path_mtu, IBV_MTU_512);
        /* kernel rxe keeps only the address vector's GRH (rxe_av_from_attr): its ibv_query_qp reports SL 0 */
        if (sr_object_count) CHECK_EQ(qa[i].ah_attr.sl, 3);
    }
    CHECK_EQ(qa[0].dest_qp_num, s.b.qp->qp_num);
    CHECK_EQ(qa[1].dest_qp_num, s.a.qp->qp_num);

    uint8_t *a = xalloc(8192), *b = xalloc(8192);
    struct ibv_mr *amr = reg(s.a.pd, a, 8192, LW), *bmr = reg(s.b.pd, b, 8192, LW);
    fill_pattern(a, 4096, 7);
    fill_pattern(b + 4096, 3000, 8);
    post_recv(s.b.qp, 1, b, 4096, bmr->lkey);
    post_recv(s.a.qp, 2, a + 4096, 4096, amr->lkey);
    post_send(s.a.qp, 3, IBV_WR_SEND, a, 4096, amr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(s.b.rcq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_RECV, s.b.qp->qp_num, 4096, 0, 0);
    CHECK(check_pattern(b, 4096, 7), "4 KiB across a 512 B MTU intact");
    post_send(s.b.qp, 4, IBV_WR_SEND, b + 4096, 3000, bmr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    wc = wait_wc(s.a.rcq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_RECV, s.a.qp->qp_num, 3000, 0, 0);
    CHECK(check_pattern(a + 4096, 3000, 8), "the answer intact");
    wc = wait_wc(s.a.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_SEND, s.a.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(s.b.scq, TMO);
    check_wc_ok(&wc, 4, IBV_WC_SEND, s.b.qp->qp_num, WC_ANY_LEN, 0, 0);

    /* rdma_cm does not move a QP it does not own: the consumer does, as librdmacm's rdma_disconnect would */
    struct ibv_qp_attr err = { .qp_state = IBV_QPS_ERR };
    CHECK_OK(ibv_modify_qp(s.a.qp, &err, IBV_QP_STATE));
    CHECK_OK(rdma_disconnect(s.cid));
    CHECK_OK(rdma_ack_cm_event(cm_expect(s.lec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    CHECK_EQ(qp_state(s.b.qp), IBV_QPS_RTS);
    CHECK_OK(ibv_destroy_qp(s.a.qp));
    CHECK_OK(ibv_destroy_qp(s.b.qp));
    s.a.id = s.b.id = NULL;
    s.a.qp = s.b.qp = NULL;
    cm_teardown(&s);
}
