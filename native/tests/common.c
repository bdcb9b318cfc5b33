#include "common.h"

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *test_addr(void) {
    const char *a = getenv("SOFTRDMA_TEST_ADDR");
    return a && *a ? a : "127.0.0.1";
}

struct sockaddr_in test_sockaddr(uint16_t port) {
    struct sockaddr_in s;
    memset(&s, 0, sizeof s);
    s.sin_family = AF_INET;
    s.sin_port = htons(port);
    if (inet_pton(AF_INET, test_addr(), &s.sin_addr) != 1) FAIL("SOFTRDMA_TEST_ADDR %s is not an IPv4 address", test_addr());
    return s;
}

double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

void msleep(int ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) && errno == EINTR) {}
}

int fd_readable(int fd, int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    int r;
    do r = poll(&p, 1, timeout_ms);
    while (r < 0 && errno == EINTR);
    if (r < 0) FAIL("poll(fd %d): %s", fd, strerror(errno));
    return r > 0 && (p.revents & POLLIN);
}

int max_rd_atom(const struct ibv_device_attr *a) {
    int m = a->max_qp_rd_atom < a->max_qp_init_rd_atom ? a->max_qp_rd_atom : a->max_qp_init_rd_atom;
    return m > 16 ? 16 : m;
}

int find_gid_index(struct ibv_context *ctx, uint8_t port, const char *ipv4, union ibv_gid *out) {
    struct in_addr in;
    if (inet_pton(AF_INET, ipv4, &in) != 1) return -1;
    struct ibv_port_attr pa;
    if (ibv_query_port(ctx, port, &pa)) return -1;
    for (int i = 0; i < pa.gid_tbl_len && i < 1024; i++) {
        union ibv_gid g;
        if (ibv_query_gid(ctx, port, i, &g)) continue;
        static const uint8_t pfx[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
        if (!memcmp(g.raw, pfx, 12) && !memcmp(g.raw + 12, &in, 4)) {
            if (out) *out = g;
            return i;
        }
    }
    return -1;
}

void dev_open(struct dev *d) {
    memset(d, 0, sizeof *d);
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list) FAIL("ibv_get_device_list: %s", strerror(errno));
    if (n == 0) FAIL("no RDMA device");
    const char *want = getenv("SOFTRDMA_TEST_DEV");
    const char *gi = getenv("SOFTRDMA_TEST_GID_INDEX");
    for (int i = 0; i < n && !d->ctx; i++) {
        if (want && *want && strcmp(ibv_get_device_name(list[i]), want)) continue;
        struct ibv_context *ctx = ibv_open_device(list[i]);
        if (!ctx) continue;
        struct ibv_device_attr da;
        if (ibv_query_device(ctx, &da)) { ibv_close_device(ctx); continue; }
        for (uint8_t p = 1; p <= da.phys_port_cnt && !d->ctx; p++) {
            int idx;
            union ibv_gid g;
            if (gi && *gi) {
                idx = atoi(gi);
                if (ibv_query_gid(ctx, p, idx, &g)) idx = -1;
            } else
                idx = find_gid_index(ctx, p, test_addr(), &g);
            if (idx < 0) continue;
            d->ctx = ctx;
            d->port = p;
            d->gid_index = idx;
            d->gid = g;
            d->attr = da;
        }
        if (!d->ctx) ibv_close_device(ctx);
    }
    ibv_free_device_list(list);
    if (!d->ctx) FAIL("no device/port has a GID for %s (::ffff:%s); set SOFTRDMA_TEST_DEV / SOFTRDMA_TEST_GID_INDEX",
                      test_addr(), test_addr());
    CHECK_OK(ibv_query_port(d->ctx, d->port, &d->pattr));
    LOG("device %s port %u gid index %d", ibv_get_device_name(d->ctx->device), d->port, d->gid_index);
}

void dev_close(struct dev *d) {
    if (d->ctx) CHECK_OK(ibv_close_device(d->ctx));
    d->ctx = NULL;
}

void qp_opts_default(struct qp_opts *o) {
    memset(o, 0, sizeof *o);
    o->max_send_wr = 64;
    o->max_recv_wr = 64;
    o->max_send_sge = 4;
    o->max_recv_sge = 4;
    o->max_inline = 64;
    o->rnr_retry = 7;
    o->min_rnr_timer = 1;
    o->cq_size = 256;
    o->timeout = 14;
    o->retry_cnt = 7;
}

const char *kind_name(int kind) { return kind == CONN_CM ? "cm" : "verbs"; }

void qp_to_init(struct ibv_qp *qp, uint8_t port) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_INIT;
    a.pkey_index = 0;
    a.port_num = port;
    a.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC;
    CHECK_OK(ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS));
}

void qp_to_rtr(struct ibv_qp *qp, const struct dev *d, uint32_t dqpn, uint32_t rq_psn, int min_rnr_timer) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = d->pattr.active_mtu;
    a.dest_qp_num = dqpn;
    a.rq_psn = rq_psn;
    a.max_dest_rd_atomic = max_rd_atom(&d->attr);
    a.min_rnr_timer = min_rnr_timer;
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid = d->gid;
    a.ah_attr.grh.sgid_index = d->gid_index;
    a.ah_attr.grh.hop_limit = 64;
    a.ah_attr.dlid = 0;
    a.ah_attr.sl = 0;
    a.ah_attr.src_path_bits = 0;
    a.ah_attr.port_num = d->port;
    CHECK_OK(ibv_modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                               IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER));
}

void qp_to_rts(struct ibv_qp *qp, const struct dev *d, uint32_t sq_psn, int timeout, int retry_cnt, int rnr_retry) {
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_RTS;
    a.timeout = timeout;
    a.retry_cnt = retry_cnt;
    a.rnr_retry = rnr_retry;
    a.sq_psn = sq_psn;
    a.max_rd_atomic = max_rd_atom(&d->attr);
    CHECK_OK(ibv_modify_qp(qp, &a,
                           IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                               IBV_QP_MAX_QP_RD_ATOMIC));
}

enum ibv_qp_state qp_state(struct ibv_qp *qp) {
    struct ibv_qp_attr a;
    struct ibv_qp_init_attr ia;
    memset(&a, 0, sizeof a);
    CHECK_OK(ibv_query_qp(qp, &a, IBV_QP_STATE, &ia));
    return a.qp_state;
}

void wait_qp_state(struct ibv_qp *qp, enum ibv_qp_state st, int timeout_ms) {
    double end = now_ms() + timeout_ms;
    enum ibv_qp_state s;
    while ((s = qp_state(qp)) != st) {
        if (now_ms() > end) FAIL("qp 0x%x: ibv_query_qp state %d, expected %d", qp->qp_num, s, st);
        msleep(2);
    }
}

static void verbs_ep(struct pair *p, struct ep *e, int side_b) {
    const struct qp_opts *o = &p->o;
    e->ctx = p->dev.ctx;
    e->pd = CHECK_PTR(ibv_alloc_pd(e->ctx));
    if (o->with_channel) e->ch = CHECK_PTR(ibv_create_comp_channel(e->ctx));
    e->scq = CHECK_PTR(ibv_create_cq(e->ctx, o->cq_size, e, e->ch, 0));
    e->rcq = CHECK_PTR(ibv_create_cq(e->ctx, o->cq_size, e, e->ch, 0));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = e->scq;
    ia.recv_cq = e->rcq;
    ia.srq = side_b ? o->srq_b : NULL;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = o->sq_sig_all;
    ia.cap.max_send_wr = o->max_send_wr;
    ia.cap.max_recv_wr = ia.srq ? 0 : o->max_recv_wr;
    ia.cap.max_send_sge = o->max_send_sge;
    ia.cap.max_recv_sge = ia.srq ? 0 : o->max_recv_sge;
    ia.cap.max_inline_data = o->max_inline;
    e->qp = CHECK_PTR(ibv_create_qp(side_b && o->srq_b ? o->srq_b->pd : e->pd, &ia));
    e->max_inline = ia.cap.max_inline_data;
}

void cm_ep_setup(struct ep *e, struct rdma_cm_id *id, struct rdma_event_channel *ec, const struct qp_opts *o) {
    e->id = id;
    e->ec = ec;
    e->ctx = CHECK_PTR(id->verbs);
    e->pd = CHECK_PTR(ibv_alloc_pd(e->ctx));
    if (o->with_channel) e->ch = CHECK_PTR(ibv_create_comp_channel(e->ctx));
    e->scq = CHECK_PTR(ibv_create_cq(e->ctx, o->cq_size, e, e->ch, 0));
    e->rcq = CHECK_PTR(ibv_create_cq(e->ctx, o->cq_size, e, e->ch, 0));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = e->scq;
    ia.recv_cq = e->rcq;
    ia.qp_type = IBV_QPT_RC;
    ia.sq_sig_all = o->sq_sig_all;
    ia.cap.max_send_wr = o->max_send_wr;
    ia.cap.max_recv_wr = o->max_recv_wr;
    ia.cap.max_send_sge = o->max_send_sge;
    ia.cap.max_recv_sge = o->max_recv_sge;
    ia.cap.max_inline_data = o->max_inline;
    CHECK_OK(rdma_create_qp(id, e->pd, &ia));
    e->qp = CHECK_PTR(id->qp);
    e->max_inline = ia.cap.max_inline_data;
}

void ep_destroy(struct ep *e) {
    if (e->qp) {
        if (e->id) rdma_destroy_qp(e->id);
        else CHECK_OK(ibv_destroy_qp(e->qp));
    }
    e->qp = NULL;
    if (e->scq) CHECK_OK(ibv_destroy_cq(e->scq));
    if (e->rcq) CHECK_OK(ibv_destroy_cq(e->rcq));
    e->scq = e->rcq = NULL;
    if (e->ch) CHECK_OK(ibv_destroy_comp_channel(e->ch));
    e->ch = NULL;
    if (e->pd) {
        dereg_pd(e->pd);
        CHECK_OK(ibv_dealloc_pd(e->pd));
    }
    e->pd = NULL;
}

struct rdma_event_channel *cm_channel(void) {
    sr_used_cm = 1;
    return CHECK_PTR(rdma_create_event_channel());
}

struct rdma_cm_event *cm_next(struct rdma_event_channel *ec, int timeout_ms) {
    if (!fd_readable(ec->fd, timeout_ms)) return NULL;
    struct rdma_cm_event *ev = NULL;
    if (rdma_get_cm_event(ec, &ev)) FAIL("rdma_get_cm_event after POLLIN: %s", strerror(errno));
    LOG("cm event %s status %d id %p", rdma_event_str(ev->event), ev->status, (void *)ev->id);
    return ev;
}

struct rdma_cm_event *cm_expect(struct rdma_event_channel *ec, enum rdma_cm_event_type type, int timeout_ms) {
    struct rdma_cm_event *ev = cm_next(ec, timeout_ms);
    if (!ev) FAIL("no rdma_cm event within %d ms (waiting for %s)", timeout_ms, rdma_event_str(type));
    if (ev->event != type)
        FAIL("rdma_cm event %s (status %d), expected %s", rdma_event_str(ev->event), ev->status, rdma_event_str(type));
    return ev;
}

uint16_t cm_listen(struct rdma_event_channel *ec, struct rdma_cm_id **id) {
    CHECK_OK(rdma_create_id(ec, id, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa = test_sockaddr(0);
    CHECK_OK(rdma_bind_addr(*id, (struct sockaddr *)&sa));
    CHECK_OK(rdma_listen(*id, 16));
    uint16_t port = ntohs(rdma_get_src_port(*id));
    CHECK(port != 0, "rdma_get_src_port after bind to port 0 + listen");
    return port;
}

struct rdma_cm_id *cm_resolve(struct rdma_event_channel *ec, const char *addr, uint16_t port) {
    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons(port);
    CHECK(inet_pton(AF_INET, addr, &sa.sin_addr) == 1, "address %s", addr);
    CHECK_OK(rdma_resolve_addr(id, NULL, (struct sockaddr *)&sa, 2000));
    struct rdma_cm_event *ev = cm_expect(ec, RDMA_CM_EVENT_ADDR_RESOLVED, 5000);
    CHECK(ev->id == id, "event id");
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_OK(rdma_resolve_route(id, 2000));
    ev = cm_expect(ec, RDMA_CM_EVENT_ROUTE_RESOLVED, 5000);
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK(id->verbs != NULL, "cm_id->verbs set after route resolution");
    return id;
}

static void cm_pair_open(struct pair *p) {
    const struct qp_opts *o = &p->o;
    p->lec = cm_channel();
    p->cec = cm_channel();
    uint16_t port = cm_listen(p->lec, &p->listen);
    struct rdma_cm_id *cid = cm_resolve(p->cec, test_addr(), port);
    cm_ep_setup(&p->a, cid, p->cec, o);
    struct ibv_device_attr da;
    CHECK_OK(ibv_query_device(cid->verbs, &da));
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = max_rd_atom(&da);
    cp.initiator_depth = max_rd_atom(&da);
    cp.retry_count = o->retry_cnt;
    cp.rnr_retry_count = o->rnr_retry;
    CHECK_OK(rdma_connect(cid, &cp));
    struct rdma_cm_event *ev = cm_expect(p->lec, RDMA_CM_EVENT_CONNECT_REQUEST, 5000);
    CHECK(ev->listen_id == p->listen, "CONNECT_REQUEST listen_id");
    struct rdma_cm_id *sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    cm_ep_setup(&p->b, sid, p->lec, o);
    CHECK_OK(rdma_accept(sid, &cp));
    ev = cm_expect(p->cec, RDMA_CM_EVENT_ESTABLISHED, 5000);
    CHECK_OK(rdma_ack_cm_event(ev));
    ev = cm_expect(p->lec, RDMA_CM_EVENT_ESTABLISHED, 5000);
    CHECK(ev->id == sid, "ESTABLISHED on the accepted id");
    CHECK_OK(rdma_ack_cm_event(ev));
    CHECK_EQ(qp_state(p->a.qp), IBV_QPS_RTS);
    CHECK_EQ(qp_state(p->b.qp), IBV_QPS_RTS);
}

void pair_open(struct pair *p, int kind, const struct qp_opts *o) {
    memset(p, 0, sizeof *p);
    p->kind = kind;
    if (o) p->o = *o;
    else qp_opts_default(&p->o);
    if (kind == CONN_CM) {
        cm_pair_open(p);
        return;
    }
    dev_open(&p->dev);
    verbs_ep(p, &p->a, 0);
    verbs_ep(p, &p->b, 1);
    uint32_t psn_a = 0x1234 + (getpid() & 0xfff), psn_b = 0x777 + (getpid() & 0xff);
    qp_to_init(p->a.qp, p->dev.port);
    qp_to_init(p->b.qp, p->dev.port);
    qp_to_rtr(p->a.qp, &p->dev, p->b.qp->qp_num, psn_b, p->o.min_rnr_timer);
    qp_to_rtr(p->b.qp, &p->dev, p->a.qp->qp_num, psn_a, p->o.min_rnr_timer);
    qp_to_rts(p->a.qp, &p->dev, psn_a, p->o.timeout, p->o.retry_cnt, p->o.rnr_retry);
    qp_to_rts(p->b.qp, &p->dev, psn_b, p->o.timeout, p->o.retry_cnt, p->o.rnr_retry);
}

void pair_close(struct pair *p) {
    if (p->kind == CONN_CM) {
        CHECK_OK(rdma_disconnect(p->a.id));
        struct rdma_cm_event *ev = cm_expect(p->lec, RDMA_CM_EVENT_DISCONNECTED, 5000);
        CHECK_OK(rdma_ack_cm_event(ev));
        rdma_disconnect(p->b.id); /* the passive side answers (DREP); may fail harmlessly */
        ev = cm_expect(p->cec, RDMA_CM_EVENT_DISCONNECTED, 5000);
        CHECK_OK(rdma_ack_cm_event(ev));
        ep_destroy(&p->a);
        ep_destroy(&p->b);
        CHECK_OK(rdma_destroy_id(p->a.id));
        CHECK_OK(rdma_destroy_id(p->b.id));
        CHECK_OK(rdma_destroy_id(p->listen));
        rdma_destroy_event_channel(p->cec);
        rdma_destroy_event_channel(p->lec);
        return;
    }
    ep_destroy(&p->a);
    ep_destroy(&p->b);
    dev_close(&p->dev);
}

void *xalloc(size_t len) {
    size_t pg = 4096, l = (len + pg - 1) / pg * pg;
    if (l == 0) l = pg;
    void *p = mmap(NULL, l, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) FAIL("mmap %zu: %s", len, strerror(errno));
    return p; /* freed with the process; tests never unmap registered memory */
}

/* MRs registered through reg() are remembered so ep_destroy() can deregister them before the PD */
static struct ibv_mr *mrs[4096];
static int nmrs;

struct ibv_mr *reg(struct ibv_pd *pd, void *buf, size_t len, int access) {
    struct ibv_mr *mr = ibv_reg_mr(pd, buf, len, access);
    if (!mr) FAIL("ibv_reg_mr(%zu bytes, access 0x%x): %s", len, access, strerror(errno));
    CHECK(mr->addr == buf, "mr->addr");
    CHECK_EQ(mr->length, len);
    CHECK(mr->pd == pd, "mr->pd");
    CHECK(nmrs < 4096, "too many MRs");
    mrs[nmrs++] = mr;
    return mr;
}

void dereg(struct ibv_mr *mr) {
    for (int i = 0; i < nmrs; i++)
        if (mrs[i] == mr) {
            mrs[i] = mrs[--nmrs];
            break;
        }
    CHECK_OK(ibv_dereg_mr(mr));
}

void dereg_pd(struct ibv_pd *pd) {
    for (int i = nmrs - 1; i >= 0; i--)
        if (mrs[i]->pd == pd) {
            struct ibv_mr *mr = mrs[i];
            mrs[i] = mrs[--nmrs];
            CHECK_OK(ibv_dereg_mr(mr));
        }
}

static uint32_t xs(uint32_t *s) {
    uint32_t x = *s;
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return *s = x;
}

void fill_pattern(void *buf, size_t len, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    uint8_t *b = buf;
    size_t i = 0;
    for (; i + 4 <= len; i += 4) {
        uint32_t v = xs(&s);
        memcpy(b + i, &v, 4);
    }
    for (; i < len; i++) b[i] = (uint8_t)xs(&s);
}

int check_pattern(const void *buf, size_t len, uint32_t seed) {
    uint32_t s = seed * 2654435761u + 1;
    const uint8_t *b = buf;
    size_t i = 0;
    for (; i + 4 <= len; i += 4) {
        uint32_t v = xs(&s);
        if (memcmp(b + i, &v, 4)) return 0;
    }
    for (; i < len; i++)
        if (b[i] != (uint8_t)xs(&s)) return 0;
    return 1;
}

uint64_t checksum64(const void *buf, size_t len) { /* FNV-1a over 64-bit words */
    const uint8_t *b = buf;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

struct ibv_sge sge(void *addr, uint32_t len, uint32_t lkey) {
    struct ibv_sge s = {(uintptr_t)addr, len, lkey};
    return s;
}

void post_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey) {
    struct ibv_sge s = sge(addr, len, lkey);
    struct ibv_recv_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = 1;
    int rc = ibv_post_recv(qp, &wr, &bad);
    if (rc) FAIL("ibv_post_recv: %d (%s)", rc, strerror(rc > 0 ? rc : errno));
}

void post_send(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
               int flags, uint32_t imm_be, uint64_t raddr, uint32_t rkey) {
    struct ibv_sge s = sge(addr, len, lkey);
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof wr);
    wr.wr_id = wr_id;
    wr.sg_list = &s;
    wr.num_sge = addr || len ? 1 : 0;
    wr.opcode = op;
    wr.send_flags = flags;
    wr.imm_data = imm_be;
    wr.wr.rdma.remote_addr = raddr;
    wr.wr.rdma.rkey = rkey;
    int rc = ibv_post_send(qp, &wr, &bad);
    if (rc) FAIL("ibv_post_send(opcode %d, len %u, flags 0x%x): %d (%s)", op, len, flags, rc, strerror(rc > 0 ? rc : errno));
}

struct ibv_wc wait_wc(struct ibv_cq *cq, int timeout_ms) {
    struct ibv_wc wc;
    double end = now_ms() + timeout_ms;
    for (unsigned spin = 0;; spin++) {
        memset(&wc, 0xA5, sizeof wc); /* detect fields the device does not write */
        int n = ibv_poll_cq(cq, 1, &wc);
        if (n < 0) FAIL("ibv_poll_cq returned %d", n);
        if (n == 1) {
            LOG("wc wr_id=%llu status=%s opcode=%s byte_len=%u imm=0x%x qp=0x%x flags=0x%x",
                (unsigned long long)wc.wr_id, ibv_wc_status_str(wc.status), opcode_str(wc.opcode), wc.byte_len,
                ntohl(wc.imm_data), wc.qp_num, wc.wc_flags);
            return wc;
        }
        if (n != 0) FAIL("ibv_poll_cq(n=1) returned %d", n);
        if (now_ms() > end) FAIL("no completion within %d ms", timeout_ms);
        if (spin > 200) {
            if (spin < 2000) sched_yield();
            else msleep(1);
        }
    }
}

void expect_no_wc(struct ibv_cq *cq, int ms) {
    double end = now_ms() + ms;
    do {
        struct ibv_wc wc;
        int n = ibv_poll_cq(cq, 1, &wc);
        if (n != 0)
            FAIL("unexpected completion (n=%d): wr_id=%llu status=%s opcode=%s", n, (unsigned long long)wc.wr_id,
                 ibv_wc_status_str(wc.status), opcode_str(wc.opcode));
        msleep(2);
    } while (now_ms() < end);
}

const char *opcode_str(enum ibv_wc_opcode op) {
    switch ((int)op) {
    case IBV_WC_SEND: return "SEND";
    case IBV_WC_RDMA_WRITE: return "RDMA_WRITE";
    case IBV_WC_RDMA_READ: return "RDMA_READ";
    case IBV_WC_COMP_SWAP: return "COMP_SWAP";
    case IBV_WC_FETCH_ADD: return "FETCH_ADD";
    case IBV_WC_BIND_MW: return "BIND_MW";
    case IBV_WC_LOCAL_INV: return "LOCAL_INV";
    case IBV_WC_RECV: return "RECV";
    case IBV_WC_RECV_RDMA_WITH_IMM: return "RECV_RDMA_WITH_IMM";
    default: return "?";
    }
}

void check_wc_ok(const struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t qp_num, uint32_t byte_len,
                 int with_imm, uint32_t imm_be) {
    if (wc->status != IBV_WC_SUCCESS)
        FAIL("wr_id %llu: status %s (%d), expected SUCCESS (vendor_err 0x%x)", (unsigned long long)wc->wr_id,
             ibv_wc_status_str(wc->status), wc->status, wc->vendor_err);
    if (wc->wr_id != wr_id) FAIL("wc.wr_id %llu, expected %llu", (unsigned long long)wc->wr_id, (unsigned long long)wr_id);
    if (wc->opcode != op) FAIL("wr_id %llu: wc.opcode %s (%d), expected %s", (unsigned long long)wr_id, opcode_str(wc->opcode), wc->opcode, opcode_str(op));
    if (wc->qp_num != qp_num) FAIL("wr_id %llu: wc.qp_num 0x%x, expected 0x%x", (unsigned long long)wr_id, wc->qp_num, qp_num);
    if (byte_len != WC_ANY_LEN && wc->byte_len != byte_len)
        FAIL("wr_id %llu: wc.byte_len %u, expected %u", (unsigned long long)wr_id, wc->byte_len, byte_len);
    if (op & IBV_WC_RECV) {
        int has = !!(wc->wc_flags & IBV_WC_WITH_IMM);
        if (has != with_imm) FAIL("wr_id %llu: wc_flags 0x%x, IBV_WC_WITH_IMM expected %s", (unsigned long long)wr_id, wc->wc_flags, with_imm ? "set" : "clear");
        if (wc->wc_flags & IBV_WC_WITH_INV) FAIL("wc_flags 0x%x has IBV_WC_WITH_INV", wc->wc_flags);
        if (with_imm && wc->imm_data != imm_be)
            FAIL("wr_id %llu: wc.imm_data raw 0x%08x, expected raw 0x%08x (network byte order: ntohl=0x%x)",
                 (unsigned long long)wr_id, wc->imm_data, imm_be, ntohl(imm_be));
    }
    /* send-side wc_flags: unspecified by the man page (rxe sets WITH_IMM for *_WITH_IMM): not checked */
}

void check_wc_err(const struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_status st, uint32_t qp_num) {
    if (wc->status != st)
        FAIL("wr_id %llu: status %s (%d), expected %s (%d)", (unsigned long long)wc->wr_id, ibv_wc_status_str(wc->status),
             wc->status, ibv_wc_status_str(st), st);
    if (wc->wr_id != wr_id) FAIL("wc.wr_id %llu, expected %llu (status %s)", (unsigned long long)wc->wr_id, (unsigned long long)wr_id, ibv_wc_status_str(st));
    if (wc->qp_num != qp_num) FAIL("wr_id %llu: wc.qp_num 0x%x, expected 0x%x", (unsigned long long)wr_id, wc->qp_num, qp_num);
}

/* ---- softrdma's registry directory (tests that run on the software device only) ---- */
const char *rundir_path(void) {
    static char buf[256];
    const char *d = getenv("SOFTRDMA_RUNDIR");
    if (d && *d) return d;
    snprintf(buf, sizeof buf, "/tmp/softrdma-%u", (unsigned)getuid());
    return buf;
}

static void rundir_name(char *buf, size_t len, pid_t runner, const char *tag) {
    snprintf(buf, len, "/tmp/softrdma-test-%d-%s", (int)runner, tag);
}

static void remove_tree(const char *path) {
    DIR *d = opendir(path);
    if (!d) {
        unlink(path);
        return;
    }
    struct dirent *e;
    char p[768];
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        snprintf(p, sizeof p, "%s/%s", path, e->d_name);
        struct stat st;
        if (!lstat(p, &st) && S_ISDIR(st.st_mode)) remove_tree(p);
        else unlink(p);
    }
    closedir(d);
    rmdir(path);
}

void rundir_remove(pid_t runner, const char *tag) {
    char dir[256];
    rundir_name(dir, sizeof dir, runner, tag);
    remove_tree(dir);
}

void rundir_private(const char *tag) {
    char dir[256];
    if (!sr_object_count) SKIP("not the softrdma device (no registry directory)");
    rundir_name(dir, sizeof dir, getppid(), tag);
    remove_tree(dir);
    CHECK(mkdir(dir, 0700) == 0, "mkdir %s: %s", dir, strerror(errno));
    CHECK(setenv("SOFTRDMA_RUNDIR", dir, 1) == 0, "setenv");
}

int cm_claim_file(uint16_t port, const char *name, const char *contents) {
    char p[512];
    snprintf(p, sizeof p, "%s/rdma-cm", rundir_path());
    CHECK(mkdir(p, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
    snprintf(p, sizeof p, "%s/rdma-cm/tcp.%u", rundir_path(), port);
    CHECK(mkdir(p, 0700) == 0 || errno == EEXIST, "mkdir %s: %s", p, strerror(errno));
    snprintf(p, sizeof p, "%s/rdma-cm/tcp.%u/%s", rundir_path(), port, name);
    int fd = open(p, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0, "create %s: %s", p, strerror(errno));
    CHECK(write(fd, contents, strlen(contents)) == (ssize_t)strlen(contents), "write %s", p);
    return fd;
}

uint16_t cm_claim_tcp_port(uint16_t port, const char *name) {
    char p[512], buf[64] = "";
    snprintf(p, sizeof p, "%s/rdma-cm/tcp.%u/%s", rundir_path(), port, name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    CHECK(fd >= 0, "open %s: %s", p, strerror(errno));
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    int pid;
    unsigned tcp;
    char flags[8];
    CHECK(n > 0 && sscanf(buf, "%d %u %7s", &pid, &tcp, flags) == 3 && tcp > 0 && tcp < 65536 &&
              strchr(flags, 'L'),
          "%s holds \"%s\", not a listener's claim", p, buf);
    return (uint16_t)tcp;
}
