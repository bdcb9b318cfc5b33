/* hostile_peer: a netty-transport-rdma peer (docs/PROTOCOL.md, version 5) that follows the protocol as far as a
 * scenario needs and then breaks one rule, against a server at HOST PORT. It prints progress lines and ends with
 * one machine-readable line:
 *
 *   RESULT scenario=<name> status=<what happened> [key=value ...]
 *
 * status is a work completion status name (REM_ACCESS_ERR, SUCCESS, ...), DISCONNECTED (the server closed the
 * connection after the violation), OPEN (it did not within the wait), a reject reason (INVALID_PARAMETERS,
 * VERSION_MISMATCH, NO_RESOURCES, NOT_ACCEPTING, or CM_REJECT for a reject without our reason), or ERROR. The exit
 * code is 0 when the scenario ran to its end (whatever the server did), 2 when it could not (usage, setup).
 *
 * Scenarios: credits [BURST], ring-overlap, imm-length, seal-wrong-window, seal-no-inv, unknown-type, bad-flags,
 * cross-connection, remote-read, refused-write [ring|noring], overwrite-held,
 * bad-params:<field> (flags, recvCredits0, recvCredits1, recvCreditsHuge, recvBufferSize4, recvBufferSize1G,
 * ringSize100, ringSize2G, ringAddressWithoutRing, ringSizeWithoutAddress, ringWraps, short, version2),
 * half-open [COUNT [SECONDS]].
 *
 * Only the verbs / rdma_cm API: it runs on the software device and on any rdma-core provider. */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netdb.h>
#include <poll.h>
#include <rdma/rdma_cma.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* docs/PROTOCOL.md */
#define MAGIC 0x4E52444Du
#define VERSION 5
#define PARAMS_LEN 32
#define REJECT_LEN 8
#define HDR_LEN 8
#define RING_PAYLOAD 16 /* before the rkeys: address u64, size u32, slabs u16, flags u16 */
#define MAX_SLABS 32
#define T_DATA 1
#define T_CREDIT 2
#define T_SHUTDOWN 3
#define T_RING 4
#define T_SEAL 5
#define F_WANTS_RING 1
#define F_RING_SEEN 2
#define IMM_SEAL 0x80000000u
#define IMM_GENERATION 0x40000000u
#define IMM_SLAB_SHIFT 25
#define ALIGN 64
#define CM_REJ_CONSUMER_DEFINED 28
/* what the hostile server process understands: stop reading for a while (see HostileServerProcess) */
static const char HOLD[8] = {'H', 'O', 'L', 'D', 0, 'R', 'D', 'M'};
/* ... and keep the next buffer it reads for a while, then print its CRC (see HostileServerProcess) */
static const char KEEP[8] = {'K', 'E', 'E', 'P', 0, 'R', 'D', 'M'};

/* this side */
#define NRECV 64
#define RBUF 4096
#define SBUF 65536
#define NSEND 320
#define GRANT 16
#define WAIT_MS 5000

static const char *scenario = "?";

static void result(const char *status, const char *fmt, ...) {
    printf("RESULT scenario=%s status=%s", scenario, status);
    if (fmt && *fmt) {
        va_list ap;
        va_start(ap, fmt);
        putchar(' ');
        vprintf(fmt, ap);
        va_end(ap);
    }
    putchar('\n');
    fflush(stdout);
}

static void note(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    putchar('\n');
    fflush(stdout);
}

/* Setup failures: the scenario did not run. */
#define DIE(...)                                                                                                   \
    do {                                                                                                           \
        char msg_[512];                                                                                            \
        snprintf(msg_, sizeof msg_, __VA_ARGS__);                                                                  \
        result("ERROR", "detail=\"%s (errno %d %s) at line %d\"", msg_, errno, strerror(errno), __LINE__);        \
        exit(2);                                                                                                   \
    } while (0)

static long now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000L + ts.tv_nsec / 1000000;
}

static const char *wc_status_name(enum ibv_wc_status s) {
    static const char *names[] = {
        [IBV_WC_SUCCESS] = "SUCCESS", [IBV_WC_LOC_LEN_ERR] = "LOC_LEN_ERR",
        [IBV_WC_LOC_QP_OP_ERR] = "LOC_QP_OP_ERR", [IBV_WC_LOC_EEC_OP_ERR] = "LOC_EEC_OP_ERR",
        [IBV_WC_LOC_PROT_ERR] = "LOC_PROT_ERR", [IBV_WC_WR_FLUSH_ERR] = "WR_FLUSH_ERR",
        [IBV_WC_MW_BIND_ERR] = "MW_BIND_ERR", [IBV_WC_BAD_RESP_ERR] = "BAD_RESP_ERR",
        [IBV_WC_LOC_ACCESS_ERR] = "LOC_ACCESS_ERR", [IBV_WC_REM_INV_REQ_ERR] = "REM_INV_REQ_ERR",
        [IBV_WC_REM_ACCESS_ERR] = "REM_ACCESS_ERR", [IBV_WC_REM_OP_ERR] = "REM_OP_ERR",
        [IBV_WC_RETRY_EXC_ERR] = "RETRY_EXC_ERR", [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR_RETRY_EXC_ERR",
        [IBV_WC_LOC_RDD_VIOL_ERR] = "LOC_RDD_VIOL_ERR", [IBV_WC_REM_INV_RD_REQ_ERR] = "REM_INV_RD_REQ_ERR",
        [IBV_WC_REM_ABORT_ERR] = "REM_ABORT_ERR", [IBV_WC_INV_EECN_ERR] = "INV_EECN_ERR",
        [IBV_WC_INV_EEC_STATE_ERR] = "INV_EEC_STATE_ERR", [IBV_WC_FATAL_ERR] = "FATAL_ERR",
        [IBV_WC_RESP_TIMEOUT_ERR] = "RESP_TIMEOUT_ERR", [IBV_WC_GENERAL_ERR] = "GENERAL_ERR",
    };
    return (unsigned)s < sizeof names / sizeof names[0] && names[s] ? names[s] : "UNKNOWN_STATUS";
}

static const char *reject_reason_name(unsigned reason) {
    switch (reason) {
    case 1: return "VERSION_MISMATCH";
    case 2: return "INVALID_PARAMETERS";
    case 3: return "NO_RESOURCES";
    case 4: return "NOT_ACCEPTING";
    default: return "UNKNOWN_REASON";
    }
}

static void put16(uint8_t *p, uint16_t v) { v = htons(v); memcpy(p, &v, 2); }
static void put32(uint8_t *p, uint32_t v) { v = htonl(v); memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)(v >> 32)); put32(p + 4, (uint32_t)v); }
static uint16_t get16(const uint8_t *p) { uint16_t v; memcpy(&v, p, 2); return ntohs(v); }
static uint32_t get32(const uint8_t *p) { uint32_t v; memcpy(&v, p, 4); return ntohl(v); }
static uint64_t get64(const uint8_t *p) { return (uint64_t)get32(p) << 32 | get32(p + 4); }

/* connect parameters this side offers: version 5 (no ring in them), GRANT credits of RBUF bytes */
static void good_params(uint8_t *p) {
    memset(p, 0, PARAMS_LEN);
    put32(p, MAGIC);
    put16(p + 4, VERSION);
    put32(p + 24, GRANT);
    put32(p + 28, RBUF);
}

struct conn {
    struct rdma_event_channel *ec;
    struct rdma_cm_id *id;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    uint8_t *rbuf, *sbuf;
    struct ibv_mr *rmr, *smr;
    char local[64];
    /* what the server offered */
    uint32_t credits; /* receive credits this side may still use */
    uint32_t peer_buf;
    uint64_t ring_addr;
    uint32_t ring_rkeys[MAX_SLABS], ring_size, slab_size, slabs;
    int ring_offers, generation;
    /* what happened */
    int disconnected, rejected, reject_reason, cm_status;
    enum ibv_wc_status last_send_status;
    int sends_done, sends_ok, first_error_seen;
    enum ibv_wc_status first_error;
    /* bytes received in DATA messages, kept for the cross-connection check */
    uint8_t echo[SBUF];
    size_t echo_len;
};

static struct rdma_cm_event *cm_wait(struct rdma_event_channel *ec, int ms) {
    struct pollfd pfd = {.fd = ec->fd, .events = POLLIN};
    if (poll(&pfd, 1, ms) <= 0) return NULL;
    struct rdma_cm_event *ev;
    if (rdma_get_cm_event(ec, &ev)) return NULL;
    return ev;
}

static void cm_expect(struct conn *c, enum rdma_cm_event_type type) {
    struct rdma_cm_event *ev = cm_wait(c->ec, WAIT_MS);
    if (!ev) DIE("no rdma_cm event (expected %s)", rdma_event_str(type));
    enum rdma_cm_event_type got = ev->event;
    int status = ev->status;
    rdma_ack_cm_event(ev);
    if (got != type) DIE("rdma_cm event %s (status %d), expected %s", rdma_event_str(got), status, rdma_event_str(type));
}

static void post_recv(struct conn *c, int i) {
    struct ibv_sge sge = {.addr = (uintptr_t)(c->rbuf + (size_t)i * RBUF), .length = RBUF, .lkey = c->rmr->lkey};
    struct ibv_recv_wr wr = {.wr_id = (uint64_t)i, .sg_list = &sge, .num_sge = 1}, *bad;
    if (ibv_post_recv(c->qp, &wr, &bad)) DIE("ibv_post_recv");
}

static const char *addr_str(struct sockaddr *sa, char *out, size_t n) {
    struct sockaddr_in *in = (struct sockaddr_in *)sa;
    char ip[INET_ADDRSTRLEN] = "?";
    if (sa && sa->sa_family == AF_INET) inet_ntop(AF_INET, &in->sin_addr, ip, sizeof ip);
    snprintf(out, n, "%s:%u", ip, sa && sa->sa_family == AF_INET ? ntohs(in->sin_port) : 0);
    return out;
}

static void resolve(struct conn *c, const char *host, const char *port) {
    struct addrinfo hints = {.ai_family = AF_INET, .ai_socktype = SOCK_STREAM}, *ai;
    if (getaddrinfo(host, port, &hints, &ai)) DIE("getaddrinfo %s:%s", host, port);
    c->ec = rdma_create_event_channel();
    if (!c->ec) DIE("rdma_create_event_channel");
    if (rdma_create_id(c->ec, &c->id, NULL, RDMA_PS_TCP)) DIE("rdma_create_id");
    if (rdma_resolve_addr(c->id, NULL, ai->ai_addr, 2000)) DIE("rdma_resolve_addr");
    freeaddrinfo(ai);
    cm_expect(c, RDMA_CM_EVENT_ADDR_RESOLVED);
    if (rdma_resolve_route(c->id, 2000)) DIE("rdma_resolve_route");
    cm_expect(c, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

static void create_qp(struct conn *c) {
    c->pd = ibv_alloc_pd(c->id->verbs);
    c->cq = ibv_create_cq(c->id->verbs, NRECV + NSEND + 16, NULL, NULL, 0);
    if (!c->pd || !c->cq) DIE("ibv_alloc_pd / ibv_create_cq");
    struct ibv_qp_init_attr qa = {.send_cq = c->cq, .recv_cq = c->cq, .qp_type = IBV_QPT_RC,
                                  .cap = {.max_send_wr = NSEND, .max_recv_wr = NRECV, .max_send_sge = 2,
                                          .max_recv_sge = 1, .max_inline_data = 0}};
    if (rdma_create_qp(c->id, c->pd, &qa)) DIE("rdma_create_qp");
    c->qp = c->id->qp;
    c->rbuf = calloc(NRECV, RBUF);
    c->sbuf = calloc(1, SBUF);
    if (!c->rbuf || !c->sbuf) DIE("calloc");
    c->rmr = ibv_reg_mr(c->pd, c->rbuf, (size_t)NRECV * RBUF, IBV_ACCESS_LOCAL_WRITE);
    c->smr = ibv_reg_mr(c->pd, c->sbuf, SBUF, IBV_ACCESS_LOCAL_WRITE);
    if (!c->rmr || !c->smr) DIE("ibv_reg_mr");
    for (int i = 0; i < NRECV; i++) post_recv(c, i);
}

/* Connects with `params` (len bytes) as private data; returns 1 when established, 0 when rejected. */
static int conn_open(struct conn *c, const char *host, const char *port, const uint8_t *params, int len) {
    memset(c, 0, sizeof *c);
    resolve(c, host, port);
    create_qp(c);
    struct rdma_conn_param cp = {.private_data = params, .private_data_len = (uint8_t)len, .responder_resources = 1,
                                 .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7};
    if (rdma_connect(c->id, &cp)) DIE("rdma_connect");
    struct rdma_cm_event *ev = cm_wait(c->ec, WAIT_MS);
    if (!ev) DIE("no answer to the connect request");
    addr_str(rdma_get_local_addr(c->id), c->local, sizeof c->local);
    if (ev->event == RDMA_CM_EVENT_REJECTED) {
        c->rejected = 1;
        c->cm_status = ev->status;
        c->reject_reason = -1;
        const uint8_t *pd = ev->param.conn.private_data;
        if (ev->status == CM_REJ_CONSUMER_DEFINED && pd && ev->param.conn.private_data_len >= REJECT_LEN &&
            get32(pd) == MAGIC)
            c->reject_reason = get16(pd + 6);
        rdma_ack_cm_event(ev);
        return 0;
    }
    if (ev->event != RDMA_CM_EVENT_ESTABLISHED) DIE("rdma_cm event %s (status %d)", rdma_event_str(ev->event), ev->status);
    const uint8_t *pd = ev->param.conn.private_data;
    if (!pd || ev->param.conn.private_data_len < PARAMS_LEN || get32(pd) != MAGIC) DIE("accept without parameters");
    c->credits = get32(pd + 24);
    c->peer_buf = get32(pd + 28);
    rdma_ack_cm_event(ev);
    note("CONNECTED local=%s credits=%u recvBufferSize=%u", c->local, c->credits, c->peer_buf);
    return 1;
}

/* Takes one receive completion: credits, RING offers, DATA bytes. */
static void on_recv(struct conn *c, struct ibv_wc *wc) {
    int slot = (int)wc->wr_id;
    if (wc->status != IBV_WC_SUCCESS) return; /* flushed after a disconnect */
    const uint8_t *m = c->rbuf + (size_t)slot * RBUF;
    if (wc->byte_len >= HDR_LEN) {
        c->credits += get16(m + 2);
        if (m[0] == T_RING && wc->byte_len >= HDR_LEN + RING_PAYLOAD) {
            c->ring_addr = get64(m + HDR_LEN);
            c->ring_size = get32(m + HDR_LEN + 8);
            c->slabs = get16(m + HDR_LEN + 12);
            if (c->slabs > MAX_SLABS) c->slabs = MAX_SLABS;
            for (uint32_t k = 0; k < c->slabs && HDR_LEN + RING_PAYLOAD + 4 * (k + 1) <= wc->byte_len; k++)
                c->ring_rkeys[k] = get32(m + HDR_LEN + RING_PAYLOAD + 4 * k);
            c->slab_size = c->slabs ? c->ring_size / c->slabs : 0;
            c->ring_offers++;
            c->generation = !c->generation;
            note("RING local=%s size=%u", c->local, c->ring_size);
        } else if (m[0] == T_DATA) {
            size_t n = wc->byte_len - HDR_LEN;
            if (c->echo_len + n <= sizeof c->echo) {
                memcpy(c->echo + c->echo_len, m + HDR_LEN, n);
                c->echo_len += n;
            }
        }
    }
    post_recv(c, slot);
}

/* Polls completions and rdma_cm events for up to ms, or until done(c) says so. */
static void pump(struct conn *c, int ms, int (*done)(struct conn *)) {
    long deadline = now_ms() + ms;
    for (;;) {
        struct ibv_wc wc[16];
        int n = ibv_poll_cq(c->cq, 16, wc);
        for (int i = 0; i < n; i++) {
            if (wc[i].opcode & IBV_WC_RECV) {
                on_recv(c, &wc[i]);
            } else {
                c->sends_done++;
                c->last_send_status = wc[i].status;
                if (wc[i].status == IBV_WC_SUCCESS) c->sends_ok++;
                if (wc[i].status != IBV_WC_SUCCESS && !c->first_error_seen) {
                    c->first_error_seen = 1;
                    c->first_error = wc[i].status;
                }
            }
        }
        struct pollfd pfd = {.fd = c->ec->fd, .events = POLLIN};
        if (!c->disconnected && poll(&pfd, 1, 0) == 1) {
            struct rdma_cm_event *ev;
            if (rdma_get_cm_event(c->ec, &ev) == 0) {
                if (ev->event == RDMA_CM_EVENT_DISCONNECTED) c->disconnected = 1;
                rdma_ack_cm_event(ev);
            }
        }
        if (done && done(c)) return;
        if (now_ms() >= deadline) return;
        if (n == 0) usleep(200);
    }
}

static int got_ring(struct conn *c) { return c->ring_offers > 0 || c->disconnected; }
static int got_disconnect(struct conn *c) { return c->disconnected; }
static int sends_idle;
/* A refused RDMA operation completes in error even when the server closes the connection at once (it does, on the
 * device's QP_ACCESS_ERR): its NAK and the disconnect race, so the disconnect does not end the wait for it. */
static int sends_reached(struct conn *c) { return c->sends_done >= sends_idle; }

/* Posts a SEND (a SEND_WITH_INV of inv_rkey when that is non-zero): header (type, flags, credits granted, ring
 * credits) + payload of len bytes (pattern seed). */
static void send_msg_inv(struct conn *c, int slot, uint8_t type, uint8_t flags, uint16_t grant, const void *payload,
                         uint32_t len, uint32_t inv_rkey) {
    uint8_t *m = c->sbuf + (size_t)(slot % 64) * 512; /* 64 header buffers below the RDMA source at SBUF / 2 */
    if (len > 512 - HDR_LEN) DIE("payload too long");
    m[0] = type;
    m[1] = flags;
    put16(m + 2, grant);
    put32(m + 4, 0);
    if (len) memcpy(m + HDR_LEN, payload, len);
    struct ibv_sge sge = {.addr = (uintptr_t)m, .length = HDR_LEN + len, .lkey = c->smr->lkey};
    struct ibv_send_wr wr = {.wr_id = (uint64_t)slot, .sg_list = &sge, .num_sge = 1,
                             .opcode = inv_rkey ? IBV_WR_SEND_WITH_INV : IBV_WR_SEND,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    if (inv_rkey) wr.invalidate_rkey = inv_rkey;
    if (ibv_post_send(c->qp, &wr, &bad)) DIE("ibv_post_send SEND");
    if (c->credits > 0) c->credits--;
}

static void send_msg(struct conn *c, int slot, uint8_t type, uint8_t flags, uint16_t grant, const void *payload,
                     uint32_t len) {
    send_msg_inv(c, slot, type, flags, grant, payload, len, 0);
}

/* Posts an RDMA operation on c's QP against (addr, rkey); local bytes from c's send buffer at offset 32 KiB. */
static void post_rdma(struct conn *c, enum ibv_wr_opcode op, uint64_t addr, uint32_t rkey, uint32_t len, uint32_t imm) {
    struct ibv_sge sge = {.addr = (uintptr_t)(c->sbuf + SBUF / 2), .length = len, .lkey = c->smr->lkey};
    struct ibv_send_wr wr = {.wr_id = 1000, .sg_list = &sge, .num_sge = 1, .opcode = op,
                             .send_flags = IBV_SEND_SIGNALED}, *bad;
    wr.wr.rdma.remote_addr = addr;
    wr.wr.rdma.rkey = rkey;
    if (op == IBV_WR_RDMA_WRITE_WITH_IMM) wr.imm_data = htonl(imm);
    if (len > SBUF / 2) DIE("rdma length");
    if (ibv_post_send(c->qp, &wr, &bad)) DIE("ibv_post_send %d", op);
}

/* Sends DATA with WANTS_RING and waits for the server's RING. */
static void ask_ring(struct conn *c, int slot, const void *payload, uint32_t len) {
    send_msg(c, slot, T_DATA, F_WANTS_RING, 0, payload, len);
    pump(c, WAIT_MS, got_ring);
    if (!c->ring_offers) DIE("no RING message after WANTS_RING%s", c->disconnected ? " (disconnected)" : "");
    if (!c->ring_size) DIE("the server offers no ring (RING of size 0)");
}

static uint32_t imm(uint32_t len, uint32_t slab, int seal, int gen) {
    return (len & ((1u << IMM_SLAB_SHIFT) - 1)) | slab << IMM_SLAB_SHIFT | (seal ? IMM_SEAL : 0) |
           (gen ? IMM_GENERATION : 0);
}

static uint32_t crc32_of(const uint8_t *p, size_t n) {
    uint32_t c = 0xFFFFFFFFu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int b = 0; b < 8; b++) c = c >> 1 ^ (0xEDB88320u & -(c & 1));
    }
    return ~c;
}

static void conn_close(struct conn *c) {
    if (!c->id) return;
    if (!c->rejected && !c->disconnected) {
        rdma_disconnect(c->id);
        pump(c, 1000, got_disconnect);
    }
    if (c->qp) rdma_destroy_qp(c->id);
    if (c->rmr) ibv_dereg_mr(c->rmr);
    if (c->smr) ibv_dereg_mr(c->smr);
    if (c->cq) ibv_destroy_cq(c->cq);
    if (c->pd) ibv_dealloc_pd(c->pd);
    rdma_destroy_id(c->id);
    rdma_destroy_event_channel(c->ec);
    free(c->rbuf);
    free(c->sbuf);
    c->id = NULL;
}

/* Waits for the server to close the connection; prints the RESULT line. */
static void expect_close(struct conn *c, const char *what) {
    pump(c, WAIT_MS, got_disconnect);
    result(c->disconnected ? "DISCONNECTED" : "OPEN", "local=%s violation=\"%s\" send_status=%s acked=%d", c->local,
           what, c->first_error_seen ? wc_status_name(c->first_error) : "SUCCESS", c->sends_ok);
}

static struct conn A, B, V;

/* ---------------------------------------------------------------- scenarios */

static void open_good(struct conn *c, const char *host, const char *port) {
    uint8_t p[PARAMS_LEN];
    good_params(p);
    if (!conn_open(c, host, port, p, PARAMS_LEN))
        DIE("connection rejected: cm status %d reason %d", c->cm_status, c->reject_reason);
}

/* More SENDs than the credits granted, in one burst of `burst` (credits do not come back before it is posted):
 * beyond the credits, they consume receives the server's shared receive queue posted for other peers. */
static void credits(const char *host, const char *port, int burst) {
    open_good(&A, host, port);
    uint32_t granted = A.credits;
    if (burst < 1 || burst > NSEND) DIE("burst %d outside 1-%d", burst, NSEND);
    for (int i = 0; i < burst; i++) send_msg(&A, i, T_DATA, 0, 0, "credit", 6);
    note("SENT %d DATA messages on %u credits", burst, granted);
    expect_close(&A, "messages beyond the receive credits granted");
    conn_close(&A);
}

static void unknown_type(const char *host, const char *port) {
    open_good(&A, host, port);
    send_msg(&A, 0, 9, 0, 0, "", 0);
    expect_close(&A, "message of unknown type 9");
    conn_close(&A);
}

static void bad_flags(const char *host, const char *port) {
    open_good(&A, host, port);
    send_msg(&A, 0, T_DATA, 0x80, 0, "flags", 5);
    expect_close(&A, "DATA with unknown flag 0x80");
    conn_close(&A);
}

/* A ring write whose immediate announces fewer bytes than it writes. */
static void imm_length(const char *host, const char *port) {
    open_good(&A, host, port);
    ask_ring(&A, 0, "ring please", 11);
    memset(A.sbuf + SBUF / 2, 0x5a, 1024);
    post_rdma(&A, IBV_WR_RDMA_WRITE_WITH_IMM, A.ring_addr, A.ring_rkeys[0], 1024, imm(512, 0, 1, A.generation));
    expect_close(&A, "immediate length 512, 1024 bytes written");
    conn_close(&A);
}

/* A ring write whose immediate claims a slab the ring does not have (the bytes land in slab 0's window). */
static void ring_overlap(const char *host, const char *port) {
    open_good(&A, host, port);
    ask_ring(&A, 0, "ring please", 11);
    uint32_t len = 4096;
    memset(A.sbuf + SBUF / 2, 0x11, len);
    post_rdma(&A, IBV_WR_RDMA_WRITE_WITH_IMM, A.ring_addr, A.ring_rkeys[0], len, imm(len, 31, 1, A.generation));
    expect_close(&A, "ring write claiming slab 31");
    conn_close(&A);
}

/* A plain ring write into slab 0 left by a SEAL message (protocol 5) that is wrong: sent with SEND_WITH_INV of slab
 * 1's window instead of slab 0's ("wrong-window"), or as a plain SEND ("no-inv"). */
static void seal_wrong(const char *host, const char *port, int with_inv) {
    open_good(&A, host, port);
    ask_ring(&A, 0, "ring please", 11);
    if (A.slabs < 2) DIE("a ring of %u slabs: seal-wrong-window needs two", A.slabs);
    uint32_t len = 1024;
    memset(A.sbuf + SBUF / 2, 0x3c, len);
    post_rdma(&A, IBV_WR_RDMA_WRITE, A.ring_addr, A.ring_rkeys[0], len, 0);
    uint8_t sealed[4];
    put32(sealed, imm(len, 0, 1, A.generation));
    send_msg_inv(&A, 1, T_SEAL, 0, 0, sealed, sizeof(sealed), with_inv ? A.ring_rkeys[1] : 0);
    expect_close(&A, with_inv ? "SEAL invalidating slab 1's window" : "SEAL without an invalidation");
    conn_close(&A);
}

/* RDMA READ of the ring: it is writable remotely, never readable. */
static void remote_read(const char *host, const char *port) {
    open_good(&A, host, port);
    ask_ring(&A, 0, "ring please", 11);
    post_rdma(&A, IBV_WR_RDMA_READ, A.ring_addr, A.ring_rkeys[0], 64, 0);
    sends_idle = A.sends_done + 1;
    pump(&A, WAIT_MS, sends_reached);
    result(A.sends_done >= sends_idle ? wc_status_name(A.last_send_status) : "NO_COMPLETION", "local=%s", A.local);
    conn_close(&A);
}

/* An RDMA WRITE the server's device refuses (an rkey the server never granted; with a ring, the ring's address
 * and a wrong rkey): the device NAKs it and puts the server's QP in error. Reports how long the server took to
 * close the connection after the write completed (close_ms, -1 if it did not within the wait). */
static void refused_write(const char *host, const char *port, const char *mode) {
    int with_ring = !strcmp(mode, "ring");
    if (!with_ring && strcmp(mode, "noring")) DIE("refused-write takes ring or noring, not %s", mode);
    open_good(&A, host, port);
    uint64_t addr = 0x7f0000010000ull;
    uint32_t rkey = 0x00abcd00u;
    if (with_ring) {
        ask_ring(&A, 0, "ring please", 11);
        addr = A.ring_addr;
        rkey = A.ring_rkeys[0] ^ 0x00a5a500u;
    }
    memset(A.sbuf + SBUF / 2, 0x77, 256);
    post_rdma(&A, IBV_WR_RDMA_WRITE, addr, rkey, 256, 0);
    sends_idle = A.sends_done + 1;
    pump(&A, WAIT_MS, sends_reached);
    const char *status = A.sends_done >= sends_idle ? wc_status_name(A.last_send_status) : "NO_COMPLETION";
    long written = now_ms();
    pump(&A, WAIT_MS, got_disconnect);
    long close_ms = A.disconnected ? now_ms() - written : -1;
    result(status, "close_ms=%ld ring=%s local=%s", close_ms, with_ring ? "yes" : "no", A.local);
    conn_close(&A);
}

static int echo_reached;
static int got_echo(struct conn *c) { return (int)c->echo_len >= echo_reached || c->disconnected; }

/* From connections A and B, write into connection V's ring with V's rkey (RDMA_WRITE from A, WRITE_WITH_IMM from
 * B), while V's own write waits unread in that ring (the server stops reading V after HOLD). V's data must come
 * back unchanged. */
static void cross_connection(const char *host, const char *port) {
    open_good(&V, host, port);
    open_good(&A, host, port);
    open_good(&B, host, port);
    ask_ring(&V, 0, HOLD, sizeof HOLD);
    echo_reached = sizeof HOLD;
    pump(&V, WAIT_MS, got_echo); /* the server echoed HOLD: it reads nothing more of V for a while */
    const uint32_t len = 1024;
    uint8_t *mine = V.sbuf + SBUF / 2;
    for (uint32_t i = 0; i < len; i++) mine[i] = (uint8_t)(i * 7 + 3);
    post_rdma(&V, IBV_WR_RDMA_WRITE_WITH_IMM, V.ring_addr, V.ring_rkeys[0], len, imm(len, 0, 1, V.generation));
    sends_idle = V.sends_done + 1;
    pump(&V, WAIT_MS, sends_reached);
    if (V.last_send_status != IBV_WC_SUCCESS) DIE("the victim's own ring write failed: %s", wc_status_name(V.last_send_status));

    memset(A.sbuf + SBUF / 2, 0xEE, len);
    memset(B.sbuf + SBUF / 2, 0xDD, len);
    post_rdma(&A, IBV_WR_RDMA_WRITE, V.ring_addr, V.ring_rkeys[0], len, 0);
    sends_idle = A.sends_done + 1;
    pump(&A, WAIT_MS, sends_reached);
    const char *write_status = A.sends_done >= sends_idle ? wc_status_name(A.last_send_status) : "NO_COMPLETION";
    post_rdma(&B, IBV_WR_RDMA_WRITE_WITH_IMM, V.ring_addr, V.ring_rkeys[0], len, imm(len, 0, 1, 1));
    sends_idle = B.sends_done + 1;
    pump(&B, WAIT_MS, sends_reached);
    const char *imm_status = B.sends_done >= sends_idle ? wc_status_name(B.last_send_status) : "NO_COMPLETION";

    echo_reached = sizeof HOLD + len;
    pump(&V, WAIT_MS, got_echo);
    const char *victim;
    if (V.disconnected) {
        victim = "closed";
    } else if ((int)V.echo_len < echo_reached) {
        victim = "no-echo";
    } else {
        victim = memcmp(V.echo + sizeof HOLD, mine, len) == 0 ? "intact" : "overwritten";
    }
    result(write_status, "imm_status=%s victim=%s local=%s attacker_write=%s attacker_imm=%s", imm_status, victim,
           V.local, A.local, B.local);
    conn_close(&A);
    conn_close(&B);
    conn_close(&V);
}

/* Zero copy under a hostile writer: V's sealed ring write reaches the server's application, which keeps the buffer
 * over the ring (KEEP); then V RDMA-writes other bytes over it with the rkey it was given for that slab. The device
 * must refuse (the slab's window was invalidated before delivery); the server prints the CRC of what it holds,
 * which the test compares with crc= here. */
static void overwrite_held(const char *host, const char *port) {
    open_good(&V, host, port);
    ask_ring(&V, 0, KEEP, sizeof KEEP);
    echo_reached = sizeof KEEP;
    pump(&V, WAIT_MS, got_echo);
    const uint32_t len = 16384;
    uint8_t *mine = V.sbuf + SBUF / 2;
    for (uint32_t i = 0; i < len; i++) mine[i] = (uint8_t)(i * 13 + 5);
    uint32_t crc = crc32_of(mine, len);
    post_rdma(&V, IBV_WR_RDMA_WRITE_WITH_IMM, V.ring_addr, V.ring_rkeys[0], len, imm(len, 0, 1, V.generation));
    sends_idle = V.sends_done + 1;
    pump(&V, WAIT_MS, sends_reached);
    if (V.last_send_status != IBV_WC_SUCCESS) DIE("the ring write failed: %s", wc_status_name(V.last_send_status));
    usleep(200 * 1000); /* the server has delivered it by now, and keeps it */
    memset(mine, 0x22, len);
    post_rdma(&V, IBV_WR_RDMA_WRITE, V.ring_addr, V.ring_rkeys[0], len, 0);
    sends_idle = V.sends_done + 1;
    pump(&V, WAIT_MS, sends_reached);
    const char *status = V.sends_done >= sends_idle ? wc_status_name(V.last_send_status) : "NO_COMPLETION";
    result(status, "crc=%08x local=%s", crc, V.local);
    conn_close(&V);
}

/* Connect parameters with one field out of its documented range. */
static void bad_params(const char *host, const char *port, const char *field) {
    uint8_t p[64];
    memset(p, 0, sizeof p);
    good_params(p);
    int len = PARAMS_LEN;
    if (!strcmp(field, "flags")) put16(p + 6, 2); /* bit 0 is OWN_QP; bit 1 is reserved */
    else if (!strcmp(field, "recvCredits0")) put32(p + 24, 0);
    else if (!strcmp(field, "recvCredits1")) put32(p + 24, 1);
    else if (!strcmp(field, "recvCreditsHuge")) put32(p + 24, 0xFFFFFFF0u);
    else if (!strcmp(field, "recvBufferSize4")) put32(p + 28, 4);
    else if (!strcmp(field, "recvBufferSize1G")) put32(p + 28, 1u << 30);
    else if (!strcmp(field, "ringSize100")) { put64(p + 8, 0x10000); put32(p + 16, 1); put32(p + 20, 100); }
    else if (!strcmp(field, "ringSize2G")) { put64(p + 8, 0x10000); put32(p + 16, 1); put32(p + 20, 1u << 31); }
    else if (!strcmp(field, "ringAddressWithoutRing")) { put64(p + 8, 0x7f0000001000ull); put32(p + 16, 0x1234); }
    else if (!strcmp(field, "ringSizeWithoutAddress")) { put32(p + 16, 0x1234); put32(p + 20, 4096); }
    else if (!strcmp(field, "ringWraps")) { put64(p + 8, 0xfffffffffffff040ull); put32(p + 16, 0x1234); put32(p + 20, 4096); }
    else if (!strcmp(field, "short")) len = 16;
    else if (!strcmp(field, "version2")) put16(p + 4, 2);
    else {
        fprintf(stderr, "unknown bad-params field %s\n", field);
        exit(2);
    }
    if (conn_open(&A, host, port, p, len)) {
        result("ACCEPTED", "local=%s", A.local);
    } else if (A.reject_reason >= 0) {
        result(reject_reason_name((unsigned)A.reject_reason), "reason=%d cm_status=%d local=%s", A.reject_reason,
               A.cm_status, A.local);
    } else {
        result("CM_REJECT", "cm_status=%d local=%s", A.cm_status, A.local);
    }
    conn_close(&A);
}

/* COUNT connects without a QP of their own that take the server's accept (CONNECT_RESPONSE) and never call
 * rdma_establish; then the attacker stays alive for SECONDS, counting what the server does to them. */
static void half_open(const char *host, const char *port, int count, int seconds) {
    struct conn *h = calloc((size_t)count, sizeof *h);
    if (!h) DIE("calloc");
    uint8_t p[PARAMS_LEN];
    good_params(p);
    int responses = 0;
    for (int i = 0; i < count; i++) {
        resolve(&h[i], host, port);
        struct rdma_conn_param cp = {.private_data = p, .private_data_len = PARAMS_LEN, .responder_resources = 1,
                                     .initiator_depth = 1, .retry_count = 7, .rnr_retry_count = 7,
                                     .qp_num = 0x100 + (uint32_t)i};
        if (rdma_connect(h[i].id, &cp)) DIE("rdma_connect");
        struct rdma_cm_event *ev = cm_wait(h[i].ec, WAIT_MS);
        if (!ev) DIE("no answer to half-open connect %d", i);
        if (ev->event == RDMA_CM_EVENT_CONNECT_RESPONSE) responses++;
        rdma_ack_cm_event(ev);
    }
    note("HALFOPEN connected=%d", responses);
    long deadline = now_ms() + seconds * 1000L;
    int events = 0;
    while (now_ms() < deadline) {
        for (int i = 0; i < count; i++) {
            struct pollfd pfd = {.fd = h[i].ec->fd, .events = POLLIN};
            if (poll(&pfd, 1, 0) == 1) {
                struct rdma_cm_event *ev;
                if (rdma_get_cm_event(h[i].ec, &ev) == 0) {
                    events++;
                    rdma_ack_cm_event(ev);
                }
            }
        }
        usleep(20000);
    }
    result("ALIVE", "connected=%d count=%d seconds=%d events=%d", responses, count, seconds, events);
    for (int i = 0; i < count; i++) {
        rdma_destroy_id(h[i].id);
        rdma_destroy_event_channel(h[i].ec);
    }
    free(h);
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s SCENARIO HOST PORT [COUNT [SECONDS]]   (COUNT: credits' burst, half-open's connects)\n"
                        "  scenarios: credits ring-overlap imm-length seal-wrong-window seal-no-inv unknown-type\n"
                        "             bad-flags cross-connection\n"
                        "             remote-read refused-write [ring|noring] bad-params:<field> half-open\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    scenario = argv[1];
    const char *host = argv[2], *port = argv[3];
    if (!strcmp(scenario, "credits")) credits(host, port, argc > 4 ? atoi(argv[4]) : 48);
    else if (!strcmp(scenario, "ring-overlap")) ring_overlap(host, port);
    else if (!strcmp(scenario, "imm-length")) imm_length(host, port);
    else if (!strcmp(scenario, "seal-wrong-window")) seal_wrong(host, port, 1);
    else if (!strcmp(scenario, "seal-no-inv")) seal_wrong(host, port, 0);
    else if (!strcmp(scenario, "unknown-type")) unknown_type(host, port);
    else if (!strcmp(scenario, "bad-flags")) bad_flags(host, port);
    else if (!strcmp(scenario, "cross-connection")) cross_connection(host, port);
    else if (!strcmp(scenario, "remote-read")) remote_read(host, port);
    else if (!strcmp(scenario, "overwrite-held")) overwrite_held(host, port);
    else if (!strcmp(scenario, "refused-write")) refused_write(host, port, argc > 4 ? argv[4] : "noring");
    else if (!strncmp(scenario, "bad-params:", 11)) bad_params(host, port, scenario + 11);
    else if (!strcmp(scenario, "half-open"))
        half_open(host, port, argc > 4 ? atoi(argv[4]) : 20, argc > 5 ? atoi(argv[5]) : 5);
    else {
        fprintf(stderr, "unknown scenario %s\n", scenario);
        return 2;
    }
    return 0;
}
