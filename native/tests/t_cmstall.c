/* rdma_cm under stalled peers: a peer that stops in the middle of the connection handshake holds up its own
 * connection only. The stalled peers are plain TCP sockets that speak the first bytes of the software
 * device's CM exchange and then nothing, found through its port space: the test runs on the software
 * device only. */
#include <netinet/in.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common.h"

#define TMO 5000
/* a connect that no stall holds up takes milliseconds; the old CM thread waited 5 s or forever */
#define QUICK_MS 2000

static struct rdma_conn_param stall_param(void) {
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = 1;
    cp.initiator_depth = 1;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    return cp;
}

static int tcp_listener(uint16_t *port) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = test_sockaddr(0);
    socklen_t len = sizeof sa;
    CHECK(fd >= 0, "socket: %s", strerror(errno));
    CHECK_OK(bind(fd, (struct sockaddr *)&sa, sizeof sa));
    CHECK_OK(listen(fd, 4));
    CHECK_OK(getsockname(fd, (struct sockaddr *)&sa, &len));
    *port = ntohs(sa.sin_port);
    return fd;
}

/*
 * Both directions at once, in one process: (1) an rdma_connect to a "server" that answers the REQ with the
 * first 10 bytes of a reply and then stalls; (2) a "client" that connects to a real listener and sends 10
 * bytes of a request and stalls. A third connection, to the real listener, must still be set up at once,
 * and the stalled ids can be destroyed without waiting.
 */
static void stall_teardown(void) { rundir_remove(getpid(), "cmstall"); }

SR_TEST_FULL(cm_stalled_peer_leaves_others_alone, "cm_stalled_peer_leaves_others_alone", 40, stall_teardown) {
    if (!sr_object_count) SKIP("the stalled peers speak the software device's CM wire");
    /* a port space of its own: the stalled server's claim takes a port number nobody else sees */
    rundir_private("cmstall");
    struct rdma_event_channel *lec = cm_channel(), *sec = cm_channel(), *cec = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(lec, &listen), fport;
    struct qp_opts o;
    qp_opts_default(&o);
    struct rdma_conn_param cp = stall_param();

    /* (1) the active side's handshake stalls inside the peer's REP: the peer is a TCP listener that a live
     * claim (held locked, as the device holds its own) enters as the listener on RDMA port fport */
    int fl = tcp_listener(&fport);
    char claim[64];
    snprintf(claim, sizeof claim, "%d %u L\n", (int)getpid(), fport);
    int cfd = cm_claim_file(fport, test_addr(), claim);
    CHECK_OK(flock(cfd, LOCK_EX));
    struct rdma_cm_id *sid = cm_resolve(sec, test_addr(), fport);
    struct ep s;
    memset(&s, 0, sizeof s);
    cm_ep_setup(&s, sid, sec, &o);
    CHECK_OK(rdma_connect(sid, &cp));
    CHECK(fd_readable(fl, TMO), "the stalled server got no connection");
    int fs = accept(fl, NULL, NULL);
    CHECK(fs >= 0, "accept: %s", strerror(errno));
    char req[512];
    CHECK(fd_readable(fs, TMO), "no REQ from rdma_connect");
    CHECK(read(fs, req, sizeof req) > 0, "REQ");
    CHECK(write(fs, req, 10) == 10, "partial reply");

    /* (2) the passive side's handshake stalls inside a REQ, sent to the TCP port under the listener */
    int fc = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in la = test_sockaddr(cm_claim_tcp_port(port, test_addr()));
    CHECK(fc >= 0 && connect(fc, (struct sockaddr *)&la, sizeof la) == 0, "connect to the listener");
    CHECK(write(fc, req, 10) == 10, "partial request");
    msleep(100); /* both stalls reach the CM thread first */

    /* a real connection, unaffected */
    double t0 = now_ms();
    struct rdma_cm_id *cid = cm_resolve(cec, test_addr(), port);
    struct ep a, b;
    memset(&a, 0, sizeof a);
    memset(&b, 0, sizeof b);
    cm_ep_setup(&a, cid, cec, &o);
    CHECK_OK(rdma_connect(cid, &cp));
    struct rdma_cm_event *ev = cm_expect(lec, RDMA_CM_EVENT_CONNECT_REQUEST, QUICK_MS);
    struct rdma_cm_id *pid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    cm_ep_setup(&b, pid, lec, &o);
    CHECK_OK(rdma_accept(pid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_ESTABLISHED, QUICK_MS)));
    CHECK_OK(rdma_ack_cm_event(cm_expect(lec, RDMA_CM_EVENT_ESTABLISHED, QUICK_MS)));
    double took = now_ms() - t0;
    CHECK(took < QUICK_MS, "connection set-up took %.0f ms next to two stalled handshakes", took);
    CHECK(cm_next(sec, 0) == NULL, "the stalled connect reported an event");

    /* the stalled ids go away without waiting for their peers */
    t0 = now_ms();
    ep_destroy(&s);
    CHECK_OK(rdma_destroy_id(sid));
    CHECK(now_ms() - t0 < QUICK_MS, "destroying the stalled id took %.0f ms", now_ms() - t0);
    ep_destroy(&a);
    ep_destroy(&b);
    CHECK_OK(rdma_destroy_id(cid));
    CHECK_OK(rdma_destroy_id(pid));
    CHECK_OK(rdma_destroy_id(listen));
    close(fc);
    close(fs);
    close(fl);
    close(cfd);
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(sec);
    rdma_destroy_event_channel(lec);
}

/*
 * A client that takes the server's REP and never answers with RTU (no QP of its own, it would call
 * rdma_establish and does not): as IB CM times out such a REP, the server's id gets UNREACHABLE with
 * -ETIMEDOUT after the REP timeout (shortened for the test), while the client stays alive.
 */
TEST(cm_rep_without_rtu_times_out, 30) {
    if (!sr_object_count) SKIP("the REP timeout is shortened through the software device's environment");
    setenv("SOFTRDMA_CM_REP_TIMEOUT_MS", "500", 1);
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(lec, &listen);
    struct rdma_cm_id *cid = cm_resolve(cec, test_addr(), port);
    struct rdma_conn_param cp = stall_param();
    cp.qp_num = 0x321;
    CHECK_OK(rdma_connect(cid, &cp));
    struct rdma_cm_event *ev = cm_expect(lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    struct rdma_cm_id *sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    struct rdma_conn_param sp = stall_param();
    sp.qp_num = 0x654;
    CHECK_OK(rdma_accept(sid, &sp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_CONNECT_RESPONSE, TMO)));
    ev = cm_expect(lec, RDMA_CM_EVENT_UNREACHABLE, TMO);
    CHECK(ev->id == sid, "UNREACHABLE for the accepted id");
    CHECK(ev->status == -ETIMEDOUT, "status %d (expected -ETIMEDOUT)", ev->status);
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_destroy_id(sid));
    CHECK_OK(rdma_destroy_id(cid));
    CHECK_OK(rdma_destroy_id(listen));
    rdma_destroy_event_channel(cec);
    rdma_destroy_event_channel(lec);
}
