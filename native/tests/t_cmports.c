/* rdma_cm's port space: as on InfiniBand and RoCE (and kernel rxe) a namespace of its own, apart from TCP's.
 * A TCP listener and an rdma_cm listener hold one port number, each reached by its own kind of connect; bind
 * conflicts follow the kernel's rdma_cm (cma_check_port); port 0 picks a free port; every id reports RDMA port
 * numbers; a killed process's port is free again. The last test (softrdma only) puts garbage where the
 * software device keeps its port space and checks that none of it is trusted. */
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE

static struct rdma_conn_param port_param(void) {
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = 1;
    cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    return cp;
}

/* a TCP listener on test_addr():port (0: any); its port in *out */
static int tcp_listen_on(uint16_t port, uint16_t *out) {
    struct sockaddr_in sa = test_sockaddr(port);
    socklen_t len = sizeof sa;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    CHECK(bind(fd, (struct sockaddr *)&sa, sizeof sa) == 0, "TCP bind to port %u: %s", port, strerror(errno));
    CHECK_OK(listen(fd, 4));
    CHECK_OK(getsockname(fd, (struct sockaddr *)&sa, &len));
    *out = ntohs(sa.sin_port);
    return fd;
}

/* a plain TCP connect to test_addr():port reaches the TCP listener tl; bytes both ways */
static void tcp_exchange(int tl, uint16_t port) {
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = test_sockaddr(port);
    char buf[16] = "";
    CHECK(c >= 0 && connect(c, (struct sockaddr *)&sa, sizeof sa) == 0, "TCP connect to %u: %s", port, strerror(errno));
    CHECK(fd_readable(tl, TMO), "the TCP listener saw no connection");
    int s = accept(tl, NULL, NULL);
    CHECK(s >= 0, "accept: %s", strerror(errno));
    CHECK(write(c, "ping over tcp", 13) == 13, "TCP write");
    CHECK(fd_readable(s, TMO) && read(s, buf, sizeof buf) == 13 && !memcmp(buf, "ping over tcp", 13), "TCP bytes at the server");
    CHECK(write(s, "pong", 4) == 4, "TCP write back");
    CHECK(fd_readable(c, TMO) && read(c, buf, sizeof buf) == 4 && !memcmp(buf, "pong", 4), "TCP bytes at the client");
    close(s);
    close(c);
}

struct conn {
    struct rdma_event_channel *lec, *cec;
    struct rdma_cm_id *cid, *sid;
    struct ep a, b;
    struct qp_opts o;
};

/* an RDMA connection from a client id (resolved by the caller, or by conn_open when cid is NULL) to the
 * listener whose events arrive on lec */
static void conn_open(struct conn *k, struct rdma_event_channel *lec, struct rdma_event_channel *cec,
                      struct rdma_cm_id *cid, uint16_t port) {
    memset(k, 0, sizeof *k);
    qp_opts_default(&k->o);
    k->lec = lec;
    k->cec = cec;
    k->cid = cid ? cid : cm_resolve(cec, test_addr(), port);
    cm_ep_setup(&k->a, k->cid, cec, &k->o);
    struct rdma_conn_param cp = port_param();
    CHECK_OK(rdma_connect(k->cid, &cp));
    struct rdma_cm_event *ev = cm_expect(lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    k->sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    cm_ep_setup(&k->b, k->sid, lec, &k->o);
    CHECK_OK(rdma_accept(k->sid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    CHECK_OK(rdma_ack_cm_event(cm_expect(lec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
}

static void conn_close(struct conn *k) {
    CHECK_OK(rdma_disconnect(k->cid));
    CHECK_OK(rdma_ack_cm_event(cm_expect(k->lec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    rdma_disconnect(k->sid);
    CHECK_OK(rdma_ack_cm_event(cm_expect(k->cec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    ep_destroy(&k->a);
    ep_destroy(&k->b);
    CHECK_OK(rdma_destroy_id(k->sid));
    CHECK_OK(rdma_destroy_id(k->cid));
}

/* a SEND each way over the connection, bytes checked */
static void rdma_exchange(struct conn *k) {
    uint8_t *ab = xalloc(4096), *bb = xalloc(4096);
    struct ibv_mr *am = reg(k->a.pd, ab, 4096, LW), *bm = reg(k->b.pd, bb, 4096, LW);
    fill_pattern(ab, 100, 21);
    fill_pattern(bb + 2048, 200, 22);
    post_recv(k->b.qp, 2, bb, 1024, bm->lkey);
    post_recv(k->a.qp, 4, ab + 2048, 1024, am->lkey);
    post_send(k->a.qp, 1, IBV_WR_SEND, ab, 100, am->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(k->a.scq, TMO);
    check_wc_ok(&wc, 1, IBV_WC_SEND, k->a.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(k->b.rcq, TMO);
    check_wc_ok(&wc, 2, IBV_WC_RECV, k->b.qp->qp_num, 100, 0, 0);
    CHECK(check_pattern(bb, 100, 21), "RDMA bytes at the server");
    post_send(k->b.qp, 3, IBV_WR_SEND, bb + 2048, 200, bm->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    wc = wait_wc(k->b.scq, TMO);
    check_wc_ok(&wc, 3, IBV_WC_SEND, k->b.qp->qp_num, WC_ANY_LEN, 0, 0);
    wc = wait_wc(k->a.rcq, TMO);
    check_wc_ok(&wc, 4, IBV_WC_RECV, k->a.qp->qp_num, 200, 0, 0);
    CHECK(check_pattern(ab + 2048, 200, 22), "RDMA bytes at the client");
}

static void check_addr(const struct sockaddr *sa, uint16_t port, const char *what) {
    struct sockaddr_in want = test_sockaddr(port);
    CHECK(sa->sa_family == AF_INET, "%s: family %d", what, sa->sa_family);
    const struct sockaddr_in *s = (const struct sockaddr_in *)sa;
    CHECK(s->sin_addr.s_addr == want.sin_addr.s_addr, "%s: address", what);
    CHECK(ntohs(s->sin_port) == port, "%s: port %u, expected %u", what, ntohs(s->sin_port), port);
}

static struct rdma_cm_id *bound_id(struct rdma_event_channel *ec, const struct sockaddr *sa, int reuse, int *err) {
    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP));
    if (reuse) CHECK_OK(rdma_set_option(id, RDMA_OPTION_ID, RDMA_OPTION_ID_REUSEADDR, &reuse, sizeof reuse));
    errno = 0;
    int rc = rdma_bind_addr(id, (struct sockaddr *)sa);
    *err = rc ? errno : 0;
    if (rc) {
        CHECK_OK(rdma_destroy_id(id));
        return NULL;
    }
    return id;
}

/* bind must fail with `want` */
static void bind_fails(struct rdma_event_channel *ec, const struct sockaddr *sa, int reuse, int want, const char *what) {
    int err;
    struct rdma_cm_id *id = bound_id(ec, sa, reuse, &err);
    CHECK(!id && err == want, "%s: bind %s, errno %d (%s), expected %s", what, id ? "succeeded" : "failed", err,
          strerror(err), strerror(want));
}

/* a TCP listener, then an rdma_cm listener on the same address and port number: both listen, a plain TCP
 * connect reaches the TCP one and rdma_connect the rdma_cm one, bytes go both ways on each; every id
 * reports RDMA port numbers */
TEST(cm_port_shared_with_tcp, 30) {
    uint16_t port;
    int tl = tcp_listen_on(0, &port);
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    struct rdma_cm_id *listen;
    CHECK_OK(rdma_create_id(lec, &listen, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa = test_sockaddr(port);
    CHECK_OK(rdma_bind_addr(listen, (struct sockaddr *)&sa));
    CHECK_OK(rdma_listen(listen, 4));
    CHECK_EQ(ntohs(rdma_get_src_port(listen)), port);
    check_addr(rdma_get_local_addr(listen), port, "listener's local address");

    struct rdma_cm_id *cid = cm_resolve(cec, test_addr(), port);
    CHECK_EQ(ntohs(rdma_get_dst_port(cid)), port);
    struct conn k;
    conn_open(&k, lec, cec, cid, port);
    uint16_t cport = ntohs(rdma_get_src_port(k.cid));
    CHECK(cport != 0, "the connected client's source port is 0");
    CHECK_EQ(ntohs(rdma_get_dst_port(k.cid)), port);
    CHECK_EQ(ntohs(rdma_get_src_port(k.sid)), port);
    CHECK_EQ(ntohs(rdma_get_dst_port(k.sid)), cport);
    check_addr(rdma_get_local_addr(k.sid), port, "accepted id's local address");
    check_addr(rdma_get_peer_addr(k.sid), cport, "accepted id's peer address");
    check_addr(rdma_get_local_addr(k.cid), cport, "client's local address");
    check_addr(rdma_get_peer_addr(k.cid), port, "client's peer address");
    rdma_exchange(&k);
    CHECK(!fd_readable(tl, 0), "rdma_connect reached the TCP listener");

    tcp_exchange(tl, port);
    CHECK(!fd_readable(lec->fd, 100), "the TCP connect reached the rdma_cm listener");
    /* the RDMA connection is unaffected */
    rdma_exchange(&k);
    conn_close(&k);
    CHECK_OK(rdma_destroy_id(listen));
    close(tl);
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(lec);
}

/* the kernel's rules (cma_check_port): same address and port EADDRINUSE; a wildcard and a specific
 * address on one port EADDRNOTAVAIL either way; REUSEADDR ids share until one listens; an AFONLY IPv6
 * wildcard and an IPv4 one coexist */
TEST(cm_port_conflicts, 30) {
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *l1, *l2;
    uint16_t p1 = cm_listen(ec, &l1);
    struct sockaddr_in spec = test_sockaddr(p1), any = test_sockaddr(p1);
    any.sin_addr.s_addr = htonl(INADDR_ANY);
    bind_fails(ec, (struct sockaddr *)&spec, 0, EADDRINUSE, "a second id on the listener's address and port");
    bind_fails(ec, (struct sockaddr *)&spec, 1, EADDRINUSE, "a REUSEADDR id on a listener's address and port");
    bind_fails(ec, (struct sockaddr *)&any, 0, EADDRNOTAVAIL, "the wildcard on a specific listener's port");

    /* a wildcard listener: a specific address on its port conflicts too */
    CHECK_OK(rdma_create_id(ec, &l2, NULL, RDMA_PS_TCP));
    any.sin_port = 0;
    CHECK_OK(rdma_bind_addr(l2, (struct sockaddr *)&any));
    CHECK_OK(rdma_listen(l2, 4));
    uint16_t p2 = ntohs(rdma_get_src_port(l2));
    CHECK(p2 != 0 && p2 != p1, "wildcard listener's port %u", p2);
    struct sockaddr_in spec2 = test_sockaddr(p2);
    bind_fails(ec, (struct sockaddr *)&spec2, 0, EADDRNOTAVAIL, "a specific address on a wildcard listener's port");
    bind_fails(ec, (struct sockaddr *)&spec2, 1, EADDRNOTAVAIL, "a REUSEADDR id on a wildcard listener's port");
    /* IPv6: an AFONLY wildcard coexists with the IPv4 one; a dual-stack one does not */
    int s6 = socket(AF_INET6, SOCK_DGRAM, 0);
    if (s6 >= 0) {
        close(s6);
        struct sockaddr_in6 any6;
        memset(&any6, 0, sizeof any6);
        any6.sin6_family = AF_INET6;
        any6.sin6_port = htons(p2);
        struct rdma_cm_id *v6;
        int one = 1;
        CHECK_OK(rdma_create_id(ec, &v6, NULL, RDMA_PS_TCP));
        CHECK_OK(rdma_set_option(v6, RDMA_OPTION_ID, RDMA_OPTION_ID_AFONLY, &one, sizeof one));
        CHECK_OK(rdma_bind_addr(v6, (struct sockaddr *)&any6));
        CHECK_OK(rdma_destroy_id(v6));
        FILE *f = fopen("/proc/sys/net/ipv6/bindv6only", "r");
        int v6only = 1;
        if (f) {
            if (fscanf(f, "%d", &v6only) != 1) v6only = 1;
            fclose(f);
        }
        if (!v6only) bind_fails(ec, (struct sockaddr *)&any6, 0, EADDRNOTAVAIL, "a dual-stack IPv6 wildcard on an IPv4 wildcard's port");
    } else {
        LOG("no IPv6: AFONLY case not run");
    }
    CHECK_OK(rdma_destroy_id(l2));
    /* free again: the specific address binds */
    int err;
    struct rdma_cm_id *b = bound_id(ec, (struct sockaddr *)&spec2, 0, &err);
    CHECK(b != NULL, "bind after the wildcard listener went: %s", strerror(err));
    CHECK_OK(rdma_destroy_id(b));
    CHECK_OK(rdma_destroy_id(l1));

    /* REUSEADDR: two bound ids share; a listener does not (the other is still there), then does alone */
    struct rdma_cm_id *r1 = bound_id(ec, (struct sockaddr *)&spec, 1, &err);
    CHECK(r1 != NULL, "REUSEADDR bind: %s", strerror(err));
    struct rdma_cm_id *r2 = bound_id(ec, (struct sockaddr *)&spec, 1, &err);
    CHECK(r2 != NULL, "a second REUSEADDR id on the same address and port: %s", strerror(err));
    bind_fails(ec, (struct sockaddr *)&spec, 0, EADDRINUSE, "an id without REUSEADDR next to REUSEADDR ones");
    errno = 0;
    CHECK(rdma_listen(r1, 4) == -1 && errno == EADDRINUSE, "listen next to another REUSEADDR id: errno %d", errno);
    CHECK_OK(rdma_destroy_id(r2));
    CHECK_OK(rdma_listen(r1, 4));
    bind_fails(ec, (struct sockaddr *)&spec, 1, EADDRINUSE, "a REUSEADDR id on the REUSEADDR listener's port");
    CHECK_OK(rdma_destroy_id(r1));
    rdma_destroy_event_channel(ec);
}

/* port 0 picks distinct free ports of ip_local_port_range, reported at once; rdma_listen on an unbound id
 * binds the IPv4 wildcard with a free port; a client bound to port 0 reports its port to the server */
TEST(cm_port_zero, 30) {
    unsigned low = 32768, high = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%u %u", &low, &high) != 2) low = 32768, high = 60999;
        fclose(f);
    }
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    struct sockaddr_in sa = test_sockaddr(0);
    int err;
    struct rdma_cm_id *b1 = bound_id(lec, (struct sockaddr *)&sa, 0, &err), *b2;
    CHECK(b1 != NULL, "bind to port 0: %s", strerror(err));
    b2 = bound_id(lec, (struct sockaddr *)&sa, 0, &err);
    CHECK(b2 != NULL, "bind to port 0: %s", strerror(err));
    uint16_t p1 = ntohs(rdma_get_src_port(b1)), p2 = ntohs(rdma_get_src_port(b2));
    CHECK(p1 >= low && p1 <= high && p2 >= low && p2 <= high && p1 != p2, "ports %u and %u (range %u-%u)", p1, p2, low, high);
    check_addr(rdma_get_local_addr(b2), p2, "bound id's local address");
    CHECK_OK(rdma_destroy_id(b2));

    struct rdma_cm_id *l;
    CHECK_OK(rdma_create_id(lec, &l, NULL, RDMA_PS_TCP));
    CHECK_OK(rdma_listen(l, 4));
    uint16_t lp = ntohs(rdma_get_src_port(l));
    const struct sockaddr_in *la = (const struct sockaddr_in *)rdma_get_local_addr(l);
    CHECK(la->sin_family == AF_INET && la->sin_addr.s_addr == htonl(INADDR_ANY) && lp != 0 && lp != p1,
          "listen without bind: family %d, port %u", la->sin_family, lp);

    /* a client that bound its own port 0 first keeps the port it got */
    struct rdma_cm_id *cid;
    CHECK_OK(rdma_create_id(cec, &cid, NULL, RDMA_PS_TCP));
    CHECK_OK(rdma_bind_addr(cid, (struct sockaddr *)&sa));
    uint16_t cp = ntohs(rdma_get_src_port(cid));
    CHECK(cp != 0 && cp != p1 && cp != lp, "client's bound port %u", cp);
    struct sockaddr_in dst = test_sockaddr(lp);
    CHECK_OK(rdma_resolve_addr(cid, NULL, (struct sockaddr *)&dst, 2000));
    CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_ADDR_RESOLVED, TMO)));
    CHECK_OK(rdma_resolve_route(cid, 2000));
    CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_ROUTE_RESOLVED, TMO)));
    struct conn k;
    conn_open(&k, lec, cec, cid, lp);
    CHECK_EQ(ntohs(rdma_get_src_port(k.cid)), cp);
    CHECK_EQ(ntohs(rdma_get_dst_port(k.sid)), cp);
    CHECK_EQ(ntohs(rdma_get_src_port(k.sid)), lp);
    check_addr(rdma_get_local_addr(k.sid), lp, "accepted id's local address");
    rdma_exchange(&k);
    conn_close(&k);
    CHECK_OK(rdma_destroy_id(l));
    CHECK_OK(rdma_destroy_id(b1));
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(lec);
}

/* connect to test_addr():port and expect the error event of "nobody listens" */
static void expect_no_listener(uint16_t port, const char *what) {
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *id = cm_resolve(ec, test_addr(), port);
    struct ep a;
    struct qp_opts o;
    memset(&a, 0, sizeof a);
    qp_opts_default(&o);
    cm_ep_setup(&a, id, ec, &o);
    struct rdma_conn_param cp = port_param();
    CHECK_OK(rdma_connect(id, &cp));
    struct rdma_cm_event *ev = cm_next(ec, 2 * TMO);
    CHECK(ev != NULL, "%s: no event after connecting", what);
    CHECK(ev->event == RDMA_CM_EVENT_REJECTED || ev->event == RDMA_CM_EVENT_UNREACHABLE, "%s: event %s status %d", what,
          rdma_event_str(ev->event), ev->status);
    CHECK_OK(rdma_ack_cm_event(ev));
    ep_destroy(&a);
    CHECK_OK(rdma_destroy_id(id));
    rdma_destroy_event_channel(ec);
}

/* connect to test_addr():port and expect the listener there to reject with private data `why` */
static void expect_reject(uint16_t port, const char *why) {
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *id = cm_resolve(ec, test_addr(), port);
    struct ep a;
    struct qp_opts o;
    memset(&a, 0, sizeof a);
    qp_opts_default(&o);
    cm_ep_setup(&a, id, ec, &o);
    struct rdma_conn_param cp = port_param();
    CHECK_OK(rdma_connect(id, &cp));
    struct rdma_cm_event *ev = cm_expect(ec, RDMA_CM_EVENT_REJECTED, 2 * TMO);
    CHECK(ev->param.conn.private_data && ev->param.conn.private_data_len >= strlen(why) + 1 &&
              !memcmp(ev->param.conn.private_data, why, strlen(why) + 1),
          "REJECTED without the listener's private data \"%s\"", why);
    CHECK_OK(rdma_ack_cm_event(ev));
    ep_destroy(&a);
    CHECK_OK(rdma_destroy_id(id));
    rdma_destroy_event_channel(ec);
}

/* a listener destroyed and another on its port: a connect finds nothing, then the new one */
TEST(cm_port_listener_replaced, 30) {
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    struct rdma_cm_id *l1, *l2;
    uint16_t port = cm_listen(lec, &l1);
    struct conn k;
    conn_open(&k, lec, cec, NULL, port);
    rdma_exchange(&k);
    conn_close(&k);
    CHECK_OK(rdma_destroy_id(l1));
    expect_no_listener(port, "the destroyed listener's port");
    struct rdma_event_channel *lec2 = cm_channel();
    CHECK_OK(rdma_create_id(lec2, &l2, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa = test_sockaddr(port);
    CHECK_OK(rdma_bind_addr(l2, (struct sockaddr *)&sa));
    CHECK_OK(rdma_listen(l2, 4));
    conn_open(&k, lec2, cec, NULL, port);
    rdma_exchange(&k);
    conn_close(&k);
    CHECK(!fd_readable(lec->fd, 0), "an event on the destroyed listener's channel");
    CHECK_OK(rdma_destroy_id(l2));
    rdma_destroy_event_channel(lec2);
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(lec);
}

/* a listener in a process that is killed: its port is taken while it lives (it answers: it rejects with
 * private data), nothing answers once it is dead, and another process listens on the port at once */
TEST(cm_port_freed_by_killed_process, 30) {
    int pfd[2];
    CHECK_OK(pipe(pfd));
    pid_t pid = fork(); /* before this process uses rdma_cm */
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        struct rdma_event_channel *ec = rdma_create_event_channel();
        struct rdma_cm_id *l;
        struct sockaddr_in sa = test_sockaddr(0);
        uint16_t port = 0;
        if (ec && !rdma_create_id(ec, &l, NULL, RDMA_PS_TCP) && !rdma_bind_addr(l, (struct sockaddr *)&sa) &&
            !rdma_listen(l, 4))
            port = ntohs(rdma_get_src_port(l));
        if (write(pfd[1], &port, sizeof port) != sizeof port) _exit(1);
        for (;;) {
            struct rdma_cm_event *ev;
            if (rdma_get_cm_event(ec, &ev)) _exit(1);
            struct rdma_cm_id *id = ev->event == RDMA_CM_EVENT_CONNECT_REQUEST ? ev->id : NULL;
            rdma_ack_cm_event(ev);
            if (id) {
                rdma_reject(id, "child", 6);
                rdma_destroy_id(id);
            }
        }
    }
    close(pfd[1]);
    uint16_t port = 0;
    CHECK(fd_readable(pfd[0], 10000) && read(pfd[0], &port, sizeof port) == sizeof port, "no port from the child");
    close(pfd[0]);
    if (!port) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        FAIL("the child could not listen");
    }
    struct rdma_event_channel *ec = cm_channel();
    struct sockaddr_in sa = test_sockaddr(port);
    bind_fails(ec, (struct sockaddr *)&sa, 0, EADDRINUSE, "the port of another process's listener");
    expect_reject(port, "child");
    CHECK_OK(kill(pid, SIGKILL));
    CHECK(waitpid(pid, NULL, 0) == pid, "waitpid");
    expect_no_listener(port, "the killed process's port");
    struct rdma_event_channel *cec = cm_channel();
    struct rdma_cm_id *l;
    CHECK_OK(rdma_create_id(ec, &l, NULL, RDMA_PS_TCP));
    CHECK_OK(rdma_bind_addr(l, (struct sockaddr *)&sa));
    CHECK_OK(rdma_listen(l, 4));
    struct conn k;
    conn_open(&k, ec, cec, NULL, port);
    rdma_exchange(&k);
    conn_close(&k);
    CHECK_OK(rdma_destroy_id(l));
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(ec);
}

static void claims_teardown(void) { rundir_remove(getpid(), "cmports"); }

/* ports of the private port space used below, and a live-looking claim's contents */
enum { P_STALE = 40001, P_LINK, P_FIFO, P_GARBAGE, P_JUNK, P_WILD };

static void claim_text(char *buf, size_t len, uint16_t tcp_port) {
    snprintf(buf, len, "%d %u L\n", (int)getpid(), tcp_port);
}

/*
 * softrdma only: the port space's files are written by other processes and never trusted. A claim that no
 * live process holds, a symlink (even to a held file), a FIFO, a held file with garbage in it, names that
 * are not claims: none is taken for a listener (the TCP listener they name sees no connection), none
 * keeps a bind out. A port-space directory that is not a directory fails the bind with ENOTDIR.
 */
SR_TEST_FULL(cm_port_claims_untrusted, "cm_port_claims_untrusted", 60, claims_teardown) {
    rundir_private("cmports");
    uint16_t tport;
    int tl = tcp_listen_on(0, &tport);
    char text[64], path[512];
    claim_text(text, sizeof text, tport);

    close(cm_claim_file(P_STALE, test_addr(), text)); /* nobody holds it: a dead process's */
    int held = cm_claim_file(P_GARBAGE, "target", text);
    CHECK_OK(flock(held, LOCK_EX));
    snprintf(path, sizeof path, "%s/rdma-cm/tcp.%u", rundir_path(), P_LINK);
    CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
    snprintf(path, sizeof path, "%s/rdma-cm/tcp.%u/%s", rundir_path(), P_LINK, test_addr());
    char target[512];
    snprintf(target, sizeof target, "%s/rdma-cm/tcp.%u/target", rundir_path(), P_GARBAGE);
    CHECK(symlink(target, path) == 0, "symlink %s", path);
    snprintf(path, sizeof path, "%s/rdma-cm/tcp.%u", rundir_path(), P_FIFO);
    CHECK(mkdir(path, 0700) == 0, "mkdir %s", path);
    snprintf(path, sizeof path, "%s/rdma-cm/tcp.%u/%s", rundir_path(), P_FIFO, test_addr());
    CHECK(mkfifo(path, 0600) == 0, "mkfifo %s", path);
    int garbage = cm_claim_file(P_GARBAGE, test_addr(), "\x01garbage 99999999 LLL\n");
    CHECK_OK(flock(garbage, LOCK_EX));
    int junk[3];
    const char *junk_names[3] = {"junk", "1.2.3.4@x", "0.0.0.0@1."};
    for (int i = 0; i < 3; i++) {
        junk[i] = cm_claim_file(P_JUNK, junk_names[i], text);
        CHECK_OK(flock(junk[i], LOCK_EX));
    }
    close(cm_claim_file(P_WILD, "0.0.0.0", text));

    expect_no_listener(P_STALE, "a claim nobody holds");
    expect_no_listener(P_LINK, "a symlink to a held claim");
    expect_no_listener(P_FIFO, "a FIFO");
    expect_no_listener(P_GARBAGE, "a held claim with garbage in it");
    expect_no_listener(P_JUNK, "names that are not claims");
    expect_no_listener(P_WILD, "a wildcard claim nobody holds");
    CHECK(!fd_readable(tl, 0), "a connect reached the TCP listener an untrusted claim names");

    /* none keeps a bind out; a listener replaces them and is reached */
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    const uint16_t ports[] = {P_STALE, P_LINK, P_FIFO, P_GARBAGE, P_JUNK, P_WILD};
    for (size_t i = 0; i < sizeof ports / sizeof ports[0]; i++) {
        struct rdma_cm_id *l;
        struct sockaddr_in sa = test_sockaddr(ports[i]);
        CHECK_OK(rdma_create_id(lec, &l, NULL, RDMA_PS_TCP));
        if (ports[i] == P_JUNK || ports[i] == P_WILD) sa.sin_addr.s_addr = htonl(INADDR_ANY);
        errno = 0;
        CHECK(rdma_bind_addr(l, (struct sockaddr *)&sa) == 0, "bind to port %u: %s", ports[i], strerror(errno));
        CHECK(rdma_listen(l, 4) == 0, "listen on port %u: %s", ports[i], strerror(errno));
        struct conn k;
        conn_open(&k, lec, cec, NULL, ports[i]);
        rdma_exchange(&k);
        conn_close(&k);
        CHECK_OK(rdma_destroy_id(l));
    }
    CHECK(!fd_readable(tl, 0), "a connect reached the TCP listener an untrusted claim names");

    /* the port space's directory replaced by a file */
    char dir[512], saved[512];
    snprintf(dir, sizeof dir, "%s/rdma-cm", rundir_path());
    snprintf(saved, sizeof saved, "%s/rdma-cm.saved", rundir_path());
    CHECK_OK(rename(dir, saved));
    int file = open(dir, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    CHECK(file >= 0, "create %s: %s", dir, strerror(errno));
    close(file);
    int err;
    struct sockaddr_in sa = test_sockaddr(0);
    struct rdma_cm_id *b = bound_id(lec, (struct sockaddr *)&sa, 0, &err);
    CHECK(!b && err == ENOTDIR, "bind with rdma-cm a regular file: errno %d (%s)", err, strerror(err));
    CHECK_OK(unlink(dir));
    CHECK_OK(rename(saved, dir));

    for (int i = 0; i < 3; i++) close(junk[i]);
    close(garbage);
    close(held);
    close(tl);
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(lec);
}

/*
 * softrdma only: an address of no interface of this machine has no softrdma instance behind it (the device
 * is one machine's), so nothing answers the connect: UNREACHABLE with -ETIMEDOUT after the connect timeout, as
 * a REQ to a host without rdma_cm, never a TCP connection to whatever listens on that port there. (The
 * kernel's CM retries its REQ for far longer.) Needs a route to 198.51.100.1 (TEST-NET-2).
 */
TEST(cm_port_remote_address_times_out, 20) {
    if (!sr_object_count) SKIP("the kernel's CM retries a REQ nobody answers for about a minute");
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(4791);
    CHECK(inet_pton(AF_INET, "198.51.100.1", &sa.sin_addr) == 1, "address");
    CHECK_OK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000));
    struct rdma_cm_event *ev = cm_next(ec, TMO);
    CHECK(ev != NULL, "no event after rdma_resolve_addr");
    if (ev->event != RDMA_CM_EVENT_ADDR_RESOLVED) {
        int st = ev->status;
        CHECK_OK(rdma_ack_cm_event(ev));
        CHECK_OK(rdma_destroy_id(id));
        rdma_destroy_event_channel(ec);
        SKIP("no route to 198.51.100.1 (status %d)", st);
    }
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_resolve_route(id, 2000));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_ROUTE_RESOLVED, TMO)));
    struct ep a;
    struct qp_opts o;
    memset(&a, 0, sizeof a);
    qp_opts_default(&o);
    cm_ep_setup(&a, id, ec, &o);
    struct rdma_conn_param cp = port_param();
    double t0 = now_ms();
    CHECK_OK(rdma_connect(id, &cp));
    ev = cm_expect(ec, RDMA_CM_EVENT_UNREACHABLE, 3 * TMO);
    double took = now_ms() - t0;
    CHECK(ev->status == -ETIMEDOUT, "status %d, expected -ETIMEDOUT", ev->status);
    CHECK(took >= 4000, "UNREACHABLE after %.0f ms, before the connect timeout", took);
    CHECK_OK(rdma_ack_cm_event(ev));
    ep_destroy(&a);
    CHECK_OK(rdma_destroy_id(id));
    rdma_destroy_event_channel(ec);
}
