/* The same data-path checks across two processes (the software device's wire path, not the in-process
 * shortcut): a forked "echo" server reports what it received (opcode, byte_len, imm, checksum) in a
 * reply SEND, and answers CSUM/FILL commands on its registered region. */
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define TMO 10000
#define LW IBV_ACCESS_LOCAL_WRITE
#define RALL (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)
#define NRECV 64
#define RSLOT 65536
#define RO_LEN 65536
#define CMD_MAGIC 0x21444d43u /* "CMD!" */
#define REP_MAGIC 0x21504552u /* "REP!" */

struct winfo {
    uint64_t addr, ro_addr;
    uint32_t rkey, ro_rkey;
    uint32_t len, pad;
};
struct wcmd {
    uint32_t magic, cmd; /* 1 = CSUM, 2 = FILL */
    uint64_t off, len;
    uint32_t seed, pad;
};
struct wrep {
    uint32_t magic, seq;
    int32_t status;
    uint32_t opcode, byte_len, imm_raw, with_imm, qp_ok;
    uint64_t csum;
};

static void wserver(int wfd, size_t rlen) {
    sr_current = "echo-server";
    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *listen;
    uint16_t port = cm_listen(ec, &listen);
    CHECK(write(wfd, &port, 2) == 2, "pipe");
    struct rdma_cm_event *ev = cm_expect(ec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
    struct rdma_cm_id *sid = ev->id;
    CHECK_OK(rdma_ack_cm_event(ev));
    struct qp_opts o;
    qp_opts_default(&o);
    o.max_recv_wr = NRECV;
    o.cq_size = 512;
    struct ep e;
    memset(&e, 0, sizeof e);
    cm_ep_setup(&e, sid, ec, &o);
    uint8_t *region = xalloc(rlen), *ro = xalloc(RO_LEN), *rbuf = xalloc((size_t)NRECV * RSLOT), *sbuf = xalloc(64 * 64);
    fill_pattern(ro, RO_LEN, 99);
    struct ibv_mr *mr = reg(e.pd, region, rlen, RALL);
    struct ibv_mr *romr = reg(e.pd, ro, RO_LEN, LW | IBV_ACCESS_REMOTE_READ);
    struct ibv_mr *rmr = reg(e.pd, rbuf, (size_t)NRECV * RSLOT, LW), *smr = reg(e.pd, sbuf, 64 * 64, LW);
    for (int i = 0; i < NRECV; i++) post_recv(e.qp, i, rbuf + (size_t)i * RSLOT, RSLOT, rmr->lkey);
    struct winfo wi = {(uintptr_t)region, (uintptr_t)ro, mr->rkey, romr->rkey, (uint32_t)rlen, 0};
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.private_data = &wi;
    cp.private_data_len = sizeof wi;
    cp.responder_resources = cp.initiator_depth = 16;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    CHECK_OK(rdma_accept(sid, &cp));
    CHECK_OK(rdma_ack_cm_event(cm_expect(ec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
    uint32_t seq = 0, sslot = 0;
    int inflight = 0, qp_error = 0;
    for (;;) {
        ev = cm_next(ec, 0);
        if (ev) {
            enum rdma_cm_event_type t = ev->event;
            CHECK_OK(rdma_ack_cm_event(ev));
            if (t == RDMA_CM_EVENT_DISCONNECTED) break;
            FAIL("unexpected cm event %s", rdma_event_str(t));
        }
        struct ibv_wc wc;
        while (ibv_poll_cq(e.scq, 1, &wc) == 1) {
            if (wc.status != IBV_WC_SUCCESS && !qp_error) FAIL("reply SEND failed: %s", ibv_wc_status_str(wc.status));
            inflight--;
        }
        int n = ibv_poll_cq(e.rcq, 1, &wc);
        if (n == 0) {
            usleep(20);
            continue;
        }
        if (wc.status != IBV_WC_SUCCESS) { /* the client provoked an error: the QP is dead, wait for the disconnect */
            qp_error = 1;
            continue;
        }
        struct wrep r;
        memset(&r, 0, sizeof r);
        r.magic = REP_MAGIC;
        r.seq = seq++;
        r.status = wc.status;
        r.opcode = wc.opcode;
        r.byte_len = wc.byte_len;
        r.imm_raw = wc.imm_data;
        r.with_imm = !!(wc.wc_flags & IBV_WC_WITH_IMM);
        r.qp_ok = wc.qp_num == e.qp->qp_num;
        uint8_t *data = rbuf + wc.wr_id * RSLOT;
        struct wcmd c;
        if (wc.opcode == IBV_WC_RECV && wc.byte_len == sizeof c && (memcpy(&c, data, sizeof c), c.magic == CMD_MAGIC)) {
            CHECK(c.off + c.len <= rlen, "command range");
            if (c.cmd == 2) fill_pattern(region + c.off, c.len, c.seed);
            r.csum = checksum64(region + c.off, c.len);
        } else if (wc.opcode == IBV_WC_RECV) {
            r.csum = checksum64(data, wc.byte_len);
        } else { /* RECV_RDMA_WITH_IMM: the client wrote at the region's start */
            r.csum = checksum64(region, wc.byte_len <= rlen ? wc.byte_len : 0);
        }
        post_recv(e.qp, wc.wr_id, data, RSLOT, rmr->lkey);
        while (inflight >= 32) {
            if (ibv_poll_cq(e.scq, 1, &wc) == 1) inflight--;
        }
        memcpy(sbuf + sslot * 64, &r, sizeof r);
        post_send(e.qp, 1000 + sslot, IBV_WR_SEND, sbuf + sslot * 64, sizeof r, smr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
        sslot = (sslot + 1) % 64;
        inflight++;
    }
    rdma_disconnect(sid);
    CHECK(check_pattern(ro, RO_LEN, 99), "the read-only region was modified by the peer");
    ep_destroy(&e);
    CHECK_OK(rdma_destroy_id(sid));
    CHECK_OK(rdma_destroy_id(listen));
    rdma_destroy_event_channel(ec);
}

struct xc {
    pid_t pid;
    int rfd;
    struct rdma_event_channel *ec;
    struct rdma_cm_id *cid;
    struct ep e;
    struct winfo wi;
    uint8_t *buf, *reps;
    size_t blen;
    struct ibv_mr *mr, *rmr;
    uint32_t seq;
};

static int xc_max_send_wr, xc_with_channel; /* client endpoint options of the next xc_open (0: defaults) */

static void xc_open(struct xc *x, size_t region, size_t blen) {
    memset(x, 0, sizeof *x);
    int pfd[2];
    CHECK_OK(pipe(pfd));
    fflush(NULL);
    x->pid = fork();
    CHECK(x->pid >= 0, "fork");
    if (x->pid == 0) {
        close(pfd[0]);
        alarm(120);
        wserver(pfd[1], region);
        sr_leak_check();
        _exit(0);
    }
    close(pfd[1]);
    x->rfd = pfd[0];
    uint16_t port;
    struct pollfd pf = {x->rfd, POLLIN, 0};
    CHECK(poll(&pf, 1, TMO) == 1 && read(x->rfd, &port, 2) == 2, "server port (server failed to start?)");
    x->ec = cm_channel();
    x->cid = cm_resolve(x->ec, test_addr(), port);
    struct qp_opts o;
    qp_opts_default(&o);
    o.cq_size = 512;
    if (xc_max_send_wr) o.max_send_wr = xc_max_send_wr;
    o.with_channel = xc_with_channel;
    cm_ep_setup(&x->e, x->cid, x->ec, &o);
    x->blen = blen;
    x->buf = xalloc(blen);
    x->mr = reg(x->e.pd, x->buf, blen, LW);
    x->reps = xalloc(64 * 64);
    x->rmr = reg(x->e.pd, x->reps, 64 * 64, LW);
    for (int i = 0; i < 64; i++) post_recv(x->e.qp, i, x->reps + i * 64, 64, x->rmr->lkey);
    struct rdma_conn_param cp;
    memset(&cp, 0, sizeof cp);
    cp.responder_resources = cp.initiator_depth = 16;
    cp.retry_count = 7;
    cp.rnr_retry_count = 7;
    CHECK_OK(rdma_connect(x->cid, &cp));
    struct rdma_cm_event *ev = cm_expect(x->ec, RDMA_CM_EVENT_ESTABLISHED, TMO);
    CHECK(ev->param.conn.private_data_len >= sizeof x->wi, "private data");
    memcpy(&x->wi, ev->param.conn.private_data, sizeof x->wi);
    CHECK_OK(rdma_ack_cm_event(ev));
}

static struct wrep xc_reply(struct xc *x) {
    struct ibv_wc wc = wait_wc(x->e.rcq, TMO);
    CHECK(wc.status == IBV_WC_SUCCESS, "reply: %s", ibv_wc_status_str(wc.status));
    check_wc_ok(&wc, wc.wr_id, IBV_WC_RECV, x->e.qp->qp_num, sizeof(struct wrep), 0, 0);
    struct wrep r;
    memcpy(&r, x->reps + wc.wr_id * 64, sizeof r);
    post_recv(x->e.qp, wc.wr_id, x->reps + wc.wr_id * 64, 64, x->rmr->lkey);
    CHECK_EQ(r.magic, REP_MAGIC);
    CHECK(r.seq == x->seq, "reply seq %u, expected %u (messages reordered or lost)", r.seq, x->seq);
    CHECK(r.qp_ok, "server-side wc.qp_num wrong");
    x->seq++;
    return r;
}

static void xc_send_done(struct xc *x, uint64_t wr_id) {
    struct ibv_wc wc = wait_wc(x->e.scq, TMO);
    check_wc_ok(&wc, wr_id, IBV_WC_SEND, x->e.qp->qp_num, WC_ANY_LEN, 0, 0);
}

static uint64_t xc_cmd(struct xc *x, uint32_t cmd, uint64_t off, uint64_t len, uint32_t seed) {
    struct wcmd c = {CMD_MAGIC, cmd, off, len, seed, 0};
    uint8_t *p = x->buf + x->blen - 4096;
    memcpy(p, &c, sizeof c);
    post_send(x->e.qp, 77, IBV_WR_SEND, p, sizeof c, x->mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    xc_send_done(x, 77);
    struct wrep r = xc_reply(x);
    CHECK_EQ(r.opcode, IBV_WC_RECV);
    return r.csum;
}

static void xc_close(struct xc *x) {
    CHECK_OK(rdma_disconnect(x->cid));
    CHECK_OK(rdma_ack_cm_event(cm_expect(x->ec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
    ep_destroy(&x->e);
    CHECK_OK(rdma_destroy_id(x->cid));
    rdma_destroy_event_channel(x->ec);
    int st;
    double end = now_ms() + 20000;
    while (waitpid(x->pid, &st, WNOHANG) != x->pid) {
        if (now_ms() > end) {
            kill(x->pid, SIGKILL);
            waitpid(x->pid, &st, 0);
            FAIL("echo server did not exit");
        }
        msleep(5);
    }
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "echo server failed (status 0x%x; its message is above)", st);
    close(x->rfd);
}

TEST(wire_send_recv, 60) {
    struct xc x;
    xc_open(&x, 1 << 20, 1 << 20);
    uint32_t lens[] = {0, 1, 100, 4096, 4096 * 3 + 5, 65536};
    for (unsigned i = 0; i < sizeof lens / sizeof *lens; i++)
        for (int imm = 0; imm < 2; imm++) {
            fill_pattern(x.buf, lens[i], i * 2 + imm);
            uint32_t iv = htonl(0xabcd0000u + i);
            post_send(x.e.qp, i, imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND, lens[i] ? x.buf : NULL, lens[i], x.mr->lkey,
                      IBV_SEND_SIGNALED, iv, 0, 0);
            xc_send_done(&x, i);
            struct wrep r = xc_reply(&x);
            CHECK_EQ(r.opcode, IBV_WC_RECV);
            CHECK_EQ(r.byte_len, lens[i]);
            CHECK_EQ(r.with_imm, imm);
            if (imm) CHECK(r.imm_raw == iv, "imm raw 0x%08x, sent raw 0x%08x", r.imm_raw, iv);
            CHECK(r.csum == checksum64(x.buf, lens[i]), "payload checksum differs (len %u)", lens[i]);
        }
    /* inline */
    uint8_t small[32];
    fill_pattern(small, 32, 5);
    post_send(x.e.qp, 50, IBV_WR_SEND, small, 32, 0, IBV_SEND_SIGNALED | IBV_SEND_INLINE, 0, 0, 0);
    uint64_t want = checksum64(small, 32);
    memset(small, 0, 32);
    xc_send_done(&x, 50);
    struct wrep r = xc_reply(&x);
    CHECK(r.csum == want && r.byte_len == 32, "inline payload");
    /* gather from 3 SGEs */
    fill_pattern(x.buf, 30000, 6);
    struct ibv_sge g[3] = {sge(x.buf, 7, x.mr->lkey), sge(x.buf + 7, 20000, x.mr->lkey), sge(x.buf + 20007, 9993, x.mr->lkey)};
    struct ibv_send_wr w = {.wr_id = 51, .sg_list = g, .num_sge = 3, .opcode = IBV_WR_SEND, .send_flags = IBV_SEND_SIGNALED}, *bad;
    CHECK_OK(ibv_post_send(x.e.qp, &w, &bad));
    xc_send_done(&x, 51);
    r = xc_reply(&x);
    CHECK(r.csum == checksum64(x.buf, 30000) && r.byte_len == 30000, "gathered payload");
    xc_close(&x);
}

TEST(wire_write_read_atomic, 60) {
    struct xc x;
    xc_open(&x, 4 << 20, 4 << 20);
    /* WRITE_WITH_IMM at the region start: server sees RECV_RDMA_WITH_IMM with byte_len and imm */
    uint32_t lens[] = {0, 3, 5000, 1 << 20};
    for (unsigned i = 0; i < 4; i++) {
        fill_pattern(x.buf, lens[i], 20 + i);
        uint32_t iv = htonl(0x01020300u + i);
        post_send(x.e.qp, i, IBV_WR_RDMA_WRITE_WITH_IMM, lens[i] ? x.buf : NULL, lens[i], x.mr->lkey, IBV_SEND_SIGNALED, iv,
                  x.wi.addr, x.wi.rkey);
        struct ibv_wc wc = wait_wc(x.e.scq, TMO);
        check_wc_ok(&wc, i, IBV_WC_RDMA_WRITE, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
        struct wrep r = xc_reply(&x);
        CHECK_EQ(r.opcode, IBV_WC_RECV_RDMA_WITH_IMM);
        CHECK_EQ(r.byte_len, lens[i]);
        CHECK(r.with_imm && r.imm_raw == iv, "imm raw 0x%08x", r.imm_raw);
        CHECK(r.csum == checksum64(x.buf, lens[i]), "written data (len %u)", lens[i]);
    }
    /* plain WRITEs at offsets, verified with CSUM */
    fill_pattern(x.buf, 3 << 20, 30);
    for (int i = 0; i < 3; i++)
        post_send(x.e.qp, 10 + i, IBV_WR_RDMA_WRITE, x.buf + (i << 20), 1 << 20, x.mr->lkey, i == 2 ? IBV_SEND_SIGNALED : 0, 0,
                  x.wi.addr + 12345 + ((uint64_t)i << 20), x.wi.rkey);
    struct ibv_wc wc = wait_wc(x.e.scq, TMO);
    check_wc_ok(&wc, 12, IBV_WC_RDMA_WRITE, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(xc_cmd(&x, 1, 12345, 3 << 20, 0) == checksum64(x.buf, 3 << 20), "WRITE data on the server");
    /* READ: the server fills, we read (16 outstanding) */
    uint64_t cs = xc_cmd(&x, 2, 0, 2 << 20, 31);
    memset(x.buf, 0, 2 << 20);
    for (int i = 0; i < 16; i++)
        post_send(x.e.qp, 100 + i, IBV_WR_RDMA_READ, x.buf + i * 131072, 131072, x.mr->lkey, IBV_SEND_SIGNALED, 0,
                  x.wi.addr + i * 131072, x.wi.rkey);
    for (int i = 0; i < 16; i++) {
        wc = wait_wc(x.e.scq, TMO);
        check_wc_ok(&wc, 100 + i, IBV_WC_RDMA_READ, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    CHECK(checksum64(x.buf, 2 << 20) == cs && check_pattern(x.buf, 2 << 20, 31), "READ data");
    /* READ from the read-only region works */
    post_send(x.e.qp, 200, IBV_WR_RDMA_READ, x.buf, RO_LEN, x.mr->lkey, IBV_SEND_SIGNALED, 0, x.wi.ro_addr, x.wi.ro_rkey);
    wc = wait_wc(x.e.scq, TMO);
    check_wc_ok(&wc, 200, IBV_WC_RDMA_READ, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
    CHECK(check_pattern(x.buf, RO_LEN, 99), "READ of the read-only region");
    /* atomics */
    struct ibv_device_attr da;
    CHECK_OK(ibv_query_device(x.e.ctx, &da));
    if (da.atomic_cap != IBV_ATOMIC_NONE) {
        xc_cmd(&x, 2, 0, 8, 0); /* some value */
        uint64_t *res = (uint64_t *)(x.buf + 8192);
        struct ibv_sge s = sge(res, 8, x.mr->lkey);
        struct ibv_send_wr aw = {.wr_id = 300, .sg_list = &s, .num_sge = 1, .opcode = IBV_WR_ATOMIC_FETCH_AND_ADD,
                                 .send_flags = IBV_SEND_SIGNALED}, *bad;
        aw.wr.atomic.remote_addr = x.wi.addr;
        aw.wr.atomic.rkey = x.wi.rkey;
        aw.wr.atomic.compare_add = 10;
        CHECK_OK(ibv_post_send(x.e.qp, &aw, &bad));
        wc = wait_wc(x.e.scq, TMO);
        check_wc_ok(&wc, 300, IBV_WC_FETCH_ADD, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
        uint64_t orig = *res;
        aw.wr_id = 301;
        aw.opcode = IBV_WR_ATOMIC_CMP_AND_SWP;
        aw.wr.atomic.compare_add = orig + 10;
        aw.wr.atomic.swap = 0xfeedfacecafebeefull;
        CHECK_OK(ibv_post_send(x.e.qp, &aw, &bad));
        wc = wait_wc(x.e.scq, TMO);
        check_wc_ok(&wc, 301, IBV_WC_COMP_SWAP, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
        CHECK(*res == orig + 10, "CMP_AND_SWP returned 0x%llx, expected 0x%llx", (unsigned long long)*res, (unsigned long long)(orig + 10));
        uint64_t v = 0xfeedfacecafebeefull;
        CHECK(xc_cmd(&x, 1, 0, 8, 0) == checksum64(&v, 8), "swapped value on the server");
    }
    xc_close(&x);
}

TEST(wire_ordering, 90) {
    struct xc x;
    xc_open(&x, 1 << 20, 1 << 20);
    const int N = 3000, W = 24;
    int sent = 0, sdone = 0, replies = 0;
    while (replies < N) {
        while (sent < N && sent - replies < W) {
            uint32_t len = 1 + (sent * 53) % 5000;
            uint8_t *p = x.buf + (sent % 32) * 8192;
            fill_pattern(p, len, 5000 + sent);
            post_send(x.e.qp, sent, sent % 3 ? IBV_WR_SEND : IBV_WR_SEND_WITH_IMM, p, len, x.mr->lkey, IBV_SEND_SIGNALED,
                      htonl(sent), 0, 0);
            sent++;
        }
        struct ibv_wc wc;
        while (ibv_poll_cq(x.e.scq, 1, &wc) == 1) {
            check_wc_ok(&wc, sdone, IBV_WC_SEND, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
            sdone++;
        }
        struct wrep r = xc_reply(&x);
        uint32_t len = 1 + (replies * 53) % 5000;
        uint8_t tmp[5001];
        fill_pattern(tmp, len, 5000 + replies);
        CHECK(r.byte_len == len && r.csum == checksum64(tmp, len), "message %d: len %u, checksum", replies, r.byte_len);
        CHECK(r.with_imm == !(replies % 3) && (!r.with_imm || r.imm_raw == htonl(replies)), "message %d imm", replies);
        replies++;
    }
    while (sdone < N) {
        struct ibv_wc wc = wait_wc(x.e.scq, TMO);
        check_wc_ok(&wc, sdone, IBV_WC_SEND, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
        sdone++;
    }
    xc_close(&x);
}

TEST(wire_64m, 180) {
    const size_t total = 64u << 20, chunk = 1u << 20;
    struct xc x;
    xc_open(&x, total, total + (1 << 20));
    fill_pattern(x.buf, total, 640);
    uint64_t cs = checksum64(x.buf, total);
    double t0 = now_ms();
    size_t posted = 0, done = 0, n = total / chunk;
    while (done < n) {
        while (posted < n && posted - done < 16) {
            post_send(x.e.qp, posted, IBV_WR_RDMA_WRITE, x.buf + posted * chunk, chunk, x.mr->lkey, IBV_SEND_SIGNALED, 0,
                      x.wi.addr + posted * chunk, x.wi.rkey);
            posted++;
        }
        struct ibv_wc wc = wait_wc(x.e.scq, 30000);
        check_wc_ok(&wc, done, IBV_WC_RDMA_WRITE, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
        done++;
    }
    double t1 = now_ms();
    CHECK(xc_cmd(&x, 1, 0, total, 0) == cs, "64 MiB WRITE: server-side checksum differs");
    memset(x.buf, 0, total);
    for (size_t i = 0; i < total / (4 << 20); i++)
        post_send(x.e.qp, 1000 + i, IBV_WR_RDMA_READ, x.buf + i * (4 << 20), 4 << 20, x.mr->lkey, IBV_SEND_SIGNALED, 0,
                  x.wi.addr + i * (4 << 20), x.wi.rkey);
    for (size_t i = 0; i < total / (4 << 20); i++) {
        struct ibv_wc wc = wait_wc(x.e.scq, 30000);
        check_wc_ok(&wc, 1000 + i, IBV_WC_RDMA_READ, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
    }
    double t2 = now_ms();
    CHECK(checksum64(x.buf, total) == cs, "64 MiB READ back differs");
    LOG("cross-process 64 MiB: WRITE %.0f ms (%.0f MB/s), READ %.0f ms (%.0f MB/s)", t1 - t0, total / 1e3 / (t1 - t0),
        t2 - t1, total / 1e3 / (t2 - t1));
    xc_close(&x);
}

/* remote access error across processes: WRITE to the read-only region; the server checks at exit that
 * its read-only region is intact */
TEST(wire_remote_access_error, 60) {
    struct xc x;
    xc_open(&x, 1 << 20, 1 << 20);
    fill_pattern(x.buf, 4096, 1);
    post_send(x.e.qp, 1, IBV_WR_RDMA_WRITE, x.buf, 4096, x.mr->lkey, IBV_SEND_SIGNALED, 0, x.wi.ro_addr, x.wi.ro_rkey);
    post_send(x.e.qp, 2, IBV_WR_SEND, x.buf, 8, x.mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
    struct ibv_wc wc = wait_wc(x.e.scq, TMO);
    check_wc_err(&wc, 1, IBV_WC_REM_ACCESS_ERR, x.e.qp->qp_num);
    wc = wait_wc(x.e.scq, TMO);
    check_wc_err(&wc, 2, IBV_WC_WR_FLUSH_ERR, x.e.qp->qp_num);
    wait_qp_state(x.e.qp, IBV_QPS_ERR, 2000);
    /* the 64 reply receives flush */
    for (int i = 0; i < 64; i++) {
        wc = wait_wc(x.e.rcq, TMO);
        CHECK(wc.status == IBV_WC_WR_FLUSH_ERR, "receive %d: %s", i, ibv_wc_status_str(wc.status));
    }
    xc_close(&x);
}

/* out-of-bounds READ across processes (a new test: never fork after this process used RDMA) */
TEST(wire_read_out_of_bounds, 60) {
    struct xc x;
    xc_open(&x, 1 << 20, 1 << 20);
    post_send(x.e.qp, 3, IBV_WR_RDMA_READ, x.buf, 4096, x.mr->lkey, IBV_SEND_SIGNALED, 0, x.wi.addr + x.wi.len - 100, x.wi.rkey);
    struct ibv_wc wc = wait_wc(x.e.scq, TMO);
    check_wc_err(&wc, 3, IBV_WC_REM_ACCESS_ERR, x.e.qp->qp_num);
    xc_close(&x);
}

/* a completion of the send CQ, by busy polling or through the completion channel */
static struct ibv_wc stream_wc(struct xc *x, int events) {
    struct ibv_wc wc;
    double end = now_ms() + TMO;
    for (;;) {
        if (ibv_poll_cq(x->e.scq, 1, &wc) == 1) return wc;
        if (now_ms() > end) FAIL("no send completion within %d ms (lost wakeup?)", TMO);
        if (!events) continue;
        CHECK_OK(ibv_req_notify_cq(x->e.scq, 0));
        if (ibv_poll_cq(x->e.scq, 1, &wc) == 1) return wc;
        CHECK(fd_readable(x->e.ch->fd, TMO) == 1, "no completion event within %d ms (lost wakeup?)", TMO);
        struct ibv_cq *cq;
        void *ctx;
        CHECK_OK(ibv_get_cq_event(x->e.ch, &cq, &ctx));
        CHECK(cq == x->e.scq, "event for another CQ");
        ibv_ack_cq_events(cq, 1);
    }
}

static double cpu_ms(void) {
    struct rusage ru;
    CHECK_OK(getrusage(RUSAGE_SELF, &ru));
    return ru.ru_utime.tv_sec * 1e3 + ru.ru_utime.tv_usec / 1e3 + ru.ru_stime.tv_sec * 1e3 + ru.ru_stime.tv_usec / 1e3;
}

/*
 * Many small WRITEs streamed across processes (a window of 192, every 16th signalled), completed by busy
 * polling and then through a completion channel: every completion in order, every byte where it belongs;
 * afterwards an idle connection costs this process (nearly) no CPU.
 */
TEST(wire_small_stream, 90) {
    enum { N = 30000, MSG = 64, SLOTS = 1024, WIN = 192, SIG = 16 };
    struct xc x;
    xc_max_send_wr = 256;
    xc_with_channel = 1;
    xc_open(&x, SLOTS * MSG, 1 << 20);
    xc_max_send_wr = xc_with_channel = 0;
    uint8_t *src = x.buf, *want = xalloc(SLOTS * MSG);
    for (int events = 0; events < 2; events++) {
        double t0 = now_ms();
        int posted = 0, done = 0;
        while (done < N) {
            while (posted < N && posted - done < WIN) {
                uint8_t *p = src + (size_t)(posted % SLOTS) * MSG;
                fill_pattern(p, MSG, (uint32_t)(events * N + posted));
                int sig = posted % SIG == SIG - 1 || posted == N - 1;
                post_send(x.e.qp, (uint64_t)posted, IBV_WR_RDMA_WRITE, p, MSG, x.mr->lkey, sig ? IBV_SEND_SIGNALED : 0, 0,
                          x.wi.addr + (uint64_t)(posted % SLOTS) * MSG, x.wi.rkey);
                posted++;
                /* the source slot is rewritten only after its WRITE completed: WIN < SLOTS */
            }
            struct ibv_wc wc = stream_wc(&x, events);
            int want = done + SIG - 1 < N - 1 ? done + SIG - 1 : N - 1;
            check_wc_ok(&wc, (uint64_t)want, IBV_WC_RDMA_WRITE, x.e.qp->qp_num, WC_ANY_LEN, 0, 0);
            done = want + 1;
        }
        double t1 = now_ms();
        LOG("%s: %d x %d B WRITEs in %.0f ms (%.2f M/s)", events ? "events" : "busy polling", N, MSG, t1 - t0,
            N / 1e3 / (t1 - t0));
        /* the region holds the last SLOTS messages */
        memset(want, 0, SLOTS * MSG);
        for (int i = N - SLOTS; i < N; i++) fill_pattern(want + (size_t)(i % SLOTS) * MSG, MSG, (uint32_t)(events * N + i));
        CHECK(xc_cmd(&x, 1, 0, SLOTS * MSG, 0) == checksum64(want, SLOTS * MSG), "streamed WRITEs: server-side checksum differs");
    }
    /* idle: neither the progress thread nor anything else keeps running (the software device's progress thread lingers
     * only briefly after traffic) */
    msleep(50);
    double c0 = cpu_ms(), w0 = now_ms();
    msleep(400);
    double c1 = cpu_ms(), w1 = now_ms();
    LOG("idle: %.1f ms CPU in %.0f ms", c1 - c0, w1 - w0);
    CHECK(c1 - c0 < 0.1 * (w1 - w0), "an idle connection costs %.1f ms CPU in %.0f ms", c1 - c0, w1 - w0);
    xc_close(&x);
}
