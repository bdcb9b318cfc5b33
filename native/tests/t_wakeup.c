/*
 * 14. completion events between two processes whose threads block on their completion channels: a
 * blocked ping-pong (both sides waiting, one wake-up per message: the process's other threads stay
 * asleep), a stream received with the arm / poll / wait pattern in a tight loop (the race between a
 * completion and the arming; one event per arm), and a sender killed while it streams (its last
 * messages still wake the blocked receiver, a later SEND to it fails, nothing hangs).
 */
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

#define TMO 10000
#define LW IBV_ACCESS_LOCAL_WRITE
#define SLOT 64
#define RQ 256

struct winfo {
    uint32_t qpn, psn;
    union ibv_gid gid;
};

struct wside {
    struct dev d;
    struct ibv_pd *pd;
    struct ibv_comp_channel *ch;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    uint8_t *buf;
    struct ibv_mr *mr;
    long arms, events;
};

static void write_all(int fd, const void *p, size_t n) {
    if (write(fd, p, n) != (ssize_t)n) FAIL("pipe write: %s", strerror(errno));
}

static void read_all(int fd, void *p, size_t n, int timeout_ms) {
    size_t got = 0;
    while (got < n) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, timeout_ms) <= 0) FAIL("peer process did not answer within %d ms", timeout_ms);
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0) FAIL("peer process closed the pipe (it failed or died)");
        got += r;
    }
}

/* a QP whose single CQ sits on a non-blocking completion channel, RQ buffers registered */
static void wside_open(struct wside *s) {
    memset(s, 0, sizeof *s);
    dev_open(&s->d);
    s->pd = CHECK_PTR(ibv_alloc_pd(s->d.ctx));
    s->ch = CHECK_PTR(ibv_create_comp_channel(s->d.ctx));
    int fl = fcntl(s->ch->fd, F_GETFL);
    CHECK(fl >= 0 && fcntl(s->ch->fd, F_SETFL, fl | O_NONBLOCK) == 0, "O_NONBLOCK: %s", strerror(errno));
    s->cq = CHECK_PTR(ibv_create_cq(s->d.ctx, 2 * RQ + 64, s, s->ch, 0));
    struct ibv_qp_init_attr ia;
    memset(&ia, 0, sizeof ia);
    ia.send_cq = ia.recv_cq = s->cq;
    ia.qp_type = IBV_QPT_RC;
    ia.cap.max_send_wr = ia.cap.max_recv_wr = RQ;
    ia.cap.max_send_sge = ia.cap.max_recv_sge = 1;
    ia.cap.max_inline_data = 16;
    s->qp = CHECK_PTR(ibv_create_qp(s->pd, &ia));
    qp_to_init(s->qp, s->d.port);
    s->buf = xalloc((size_t)(RQ + 1) * SLOT);
    s->mr = reg(s->pd, s->buf, (size_t)(RQ + 1) * SLOT, LW);
}

/* exchange QP numbers over the pipes and bring the QP to RTS (infinite RNR retry: the receiver paces) */
static void wside_connect(struct wside *s, int in, int out, uint32_t psn) {
    struct winfo me = {s->qp->qp_num, psn, s->d.gid}, peer;
    write_all(out, &me, sizeof me);
    read_all(in, &peer, sizeof peer, TMO);
    qp_to_rtr(s->qp, &s->d, peer.qpn, peer.psn, 1);
    qp_to_rts(s->qp, &s->d, me.psn, 14, 7, 7);
}

static void wside_close(struct wside *s) {
    if (s->events) ibv_ack_cq_events(s->cq, (unsigned)s->events);
    CHECK_OK(ibv_destroy_qp(s->qp));
    CHECK_OK(ibv_destroy_cq(s->cq));
    CHECK_OK(ibv_destroy_comp_channel(s->ch));
    dereg_pd(s->pd);
    CHECK_OK(ibv_dealloc_pd(s->pd));
    dev_close(&s->d);
}

static void post_slot(struct wside *s, uint64_t wr_id) {
    post_recv(s->qp, wr_id, s->buf + (wr_id % RQ) * SLOT, SLOT, s->mr->lkey);
}

/*
 * The next completion, waiting as an event-driven program does: poll; if empty, arm, poll again (a
 * completion between the two polls raised no event), then wait for the channel and take its event. An
 * armed CQ that had a completion must make the fd readable: a wait of timeout_ms is a lost wake-up.
 * Returns 0 when timeout_ms passed with nothing (only with allow_idle).
 */
static int next_wc(struct wside *s, struct ibv_wc *wc, int timeout_ms, int allow_idle) {
    int armed = 0;
    for (;;) {
        int n = ibv_poll_cq(s->cq, 1, wc);
        CHECK(n >= 0, "ibv_poll_cq: %d", n);
        if (n) return 1;
        if (!armed) {
            CHECK_OK(ibv_req_notify_cq(s->cq, 0));
            s->arms++;
            armed = 1;
            continue;
        }
        if (!fd_readable(s->ch->fd, timeout_ms)) {
            if (allow_idle) return 0;
            FAIL("armed CQ: no completion event within %d ms (lost wake-up?)", timeout_ms);
        }
        struct ibv_cq *cq;
        void *ctx;
        if (ibv_get_cq_event(s->ch, &cq, &ctx)) {
            /* readable without an event (the device looked for one and found none yet): wait on */
            CHECK(errno == EAGAIN, "ibv_get_cq_event: %s", strerror(errno));
            continue;
        }
        /* one event per arm at most: take every event there is (an earlier arm's may still be pending) */
        do {
            CHECK(cq == s->cq && ctx == s, "event for cq %p ctx %p", (void *)cq, ctx);
            s->events++;
            CHECK(s->events <= s->arms, "%ld events after %ld arms", s->events, s->arms);
        } while (!ibv_get_cq_event(s->ch, &cq, &ctx));
        CHECK(errno == EAGAIN, "ibv_get_cq_event: %s", strerror(errno));
        armed = 0;
    }
}

/* context switches of this process's threads other than the caller, from /proc */
static long other_threads_switches(void) {
    DIR *dir = opendir("/proc/self/task");
    long me = syscall(SYS_gettid), sum = 0;
    struct dirent *e;
    CHECK(dir != NULL, "/proc/self/task: %s", strerror(errno));
    while ((e = readdir(dir))) {
        if (e->d_name[0] == '.' || atol(e->d_name) == me) continue;
        char path[300], line[128];
        snprintf(path, sizeof path, "/proc/self/task/%s/status", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue; /* the thread ended */
        while (fgets(line, sizeof line, f)) {
            long v;
            if (sscanf(line, "voluntary_ctxt_switches: %ld", &v) == 1 ||
                sscanf(line, "nonvoluntary_ctxt_switches: %ld", &v) == 1)
                sum += v;
        }
        fclose(f);
    }
    closedir(dir);
    return sum;
}

static void send_seq(struct wside *s, uint32_t seq, int signaled) {
    memcpy(s->buf + RQ * SLOT, &seq, sizeof seq);
    post_send(s->qp, seq, IBV_WR_SEND, s->buf + RQ * SLOT, sizeof seq, s->mr->lkey,
              IBV_SEND_INLINE | (signaled ? IBV_SEND_SIGNALED : 0), 0, 0, 0);
}

/* a completion that is a receive (sends are signalled every 16th and only counted) */
static struct ibv_wc next_recv(struct wside *s, int *unacked_sends) {
    struct ibv_wc wc;
    for (;;) {
        next_wc(s, &wc, TMO, 0);
        CHECK(wc.status == IBV_WC_SUCCESS, "completion %s (wr_id %llu)", ibv_wc_status_str(wc.status),
              (unsigned long long)wc.wr_id);
        if (wc.opcode == IBV_WC_RECV) return wc;
        *unacked_sends -= 16;
    }
}

/*
 * Both processes block on their channels for every message of a ping-pong. Each message must wake the
 * blocked side itself, not through its other threads: on a device with a progress thread, fewer of that
 * thread's wake-ups than round trips. When the progress thread relayed every message to the waiting
 * thread it switched 2.8 times per round trip. With doorbells what remains is the traffic that arrives
 * between an event taken and the next arm (an ACK, the peer's next message), which no doorbell covers:
 * 0.01-0.1 per round trip on a loaded machine, where the thread re-arms before the peer answers; up to 0.4
 * on an idle one, where the peer answers at once, and 1.2 once on CI's machine (faster than ours: the test took
 * 0.13 s against 0.17-0.2 s here). How much arrives before the re-arm is the machine's, so the bound is the
 * one a relaying device cannot meet: two switches per round trip (it made 2.8), not one.
 */
#define PP_N 4000

static void pingpong(struct wside *s, int first) {
    int sends = 0;
    for (int i = 0; i < RQ; i++) post_slot(s, (uint64_t)i);
    long before = other_threads_switches();
    for (uint32_t i = 0; i < PP_N; i++) {
        if (first) {
            send_seq(s, i, ++sends % 16 == 0);
        }
        struct ibv_wc wc = next_recv(s, &sends);
        uint32_t got;
        memcpy(&got, s->buf + (wc.wr_id % RQ) * SLOT, sizeof got);
        CHECK(wc.byte_len == sizeof got && got == i, "message %u carries %u (len %u)", i, got, wc.byte_len);
        post_slot(s, wc.wr_id + RQ);
        if (!first) send_seq(s, i, ++sends % 16 == 0);
    }
    long others = other_threads_switches() - before;
    LOG("%s: %d round trips, %ld arms, %ld events, other threads switched %ld times", first ? "ping" : "pong",
        PP_N, s->arms, s->events, others);
    CHECK(others < 2 * PP_N, "the process's other threads switched %ld times in %d blocked round trips: "
          "messages wake more than the waiting thread", others, PP_N);
}

TEST(wakeup_blocked_pingpong, 120) {
    int up[2], down[2];
    CHECK_OK(pipe(up));
    CHECK_OK(pipe(down));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        sr_current = "pong";
        struct wside s;
        wside_open(&s);
        wside_connect(&s, down[0], up[1], 0x2345);
        char c = 'r';
        write_all(up[1], &c, 1);
        pingpong(&s, 0);
        read_all(down[0], &c, 1, TMO);
        wside_close(&s);
        _exit(0);
    }
    struct wside s;
    wside_open(&s);
    wside_connect(&s, up[0], down[1], 0x1234);
    char c;
    read_all(up[0], &c, 1, TMO); /* the peer's receives are posted before ours are needed */
    pingpong(&s, 1);
    write_all(down[1], &c, 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "pong failed (status 0x%x)", st);
    wside_close(&s);
}

/*
 * A child streams small SENDs as fast as its receive window allows (RNR NAKs pace it); the receiver
 * takes each completion with arm / poll / wait, so completions land before, between and after its arms.
 */
#define RACE_N 30000

TEST(wakeup_arm_race_stream, 120) {
    int up[2], down[2];
    CHECK_OK(pipe(up));
    CHECK_OK(pipe(down));
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        sr_current = "streamer";
        struct wside s;
        wside_open(&s);
        wside_connect(&s, down[0], up[1], 0x77);
        char c;
        read_all(down[0], &c, 1, TMO);
        int outstanding = 0;
        for (uint32_t i = 0; i < RACE_N; i++) {
            send_seq(&s, i, ++outstanding % 16 == 0);
            while (outstanding >= RQ - 16) {
                struct ibv_wc wc = wait_wc(s.cq, TMO);
                CHECK(wc.status == IBV_WC_SUCCESS, "SEND completed %s", ibv_wc_status_str(wc.status));
                outstanding -= 16;
            }
        }
        while (outstanding >= 16) {
            struct ibv_wc wc = wait_wc(s.cq, TMO);
            CHECK(wc.status == IBV_WC_SUCCESS, "SEND completed %s", ibv_wc_status_str(wc.status));
            outstanding -= 16;
        }
        read_all(down[0], &c, 1, TMO);
        wside_close(&s);
        _exit(0);
    }
    struct wside s;
    wside_open(&s);
    for (int i = 0; i < RQ; i++) post_slot(&s, (uint64_t)i);
    wside_connect(&s, up[0], down[1], 0x88);
    char c = 'g';
    write_all(down[1], &c, 1);
    for (uint32_t i = 0; i < RACE_N; i++) {
        struct ibv_wc wc;
        next_wc(&s, &wc, TMO, 0);
        CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV, "completion %s opcode %d",
              ibv_wc_status_str(wc.status), wc.opcode);
        uint32_t got;
        memcpy(&got, s.buf + (wc.wr_id % RQ) * SLOT, sizeof got);
        CHECK(got == i, "message %u carries %u", i, got);
        post_slot(&s, wc.wr_id + RQ);
    }
    LOG("%d messages, %ld arms, %ld events", RACE_N, s.arms, s.events);
    CHECK(s.arms > 0 && s.events > 0, "the stream never made the receiver wait (%ld arms, %ld events)", s.arms,
          s.events);
    write_all(down[1], &c, 1);
    int st;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "streamer failed (status 0x%x)",
          st);
    wside_close(&s);
}

/*
 * A sender killed (SIGKILL) in the middle of a stream, so at any point of writing a message and waking
 * the receiver: the receiver, blocked on its channel, still gets every message the sender finished, in
 * order, then nothing; a SEND to the dead peer completes in error through the channel. (One round: a
 * child forked after the device was opened would share the parent's device state.)
 */
TEST(wakeup_sender_killed, 120) {
    {
        int up[2], down[2];
        CHECK_OK(pipe(up));
        CHECK_OK(pipe(down));
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork");
        if (pid == 0) {
            sr_current = "victim";
            struct wside s;
            wside_open(&s);
            wside_connect(&s, down[0], up[1], 0x99);
            char c;
            read_all(down[0], &c, 1, TMO);
            int outstanding = 0;
            for (uint32_t i = 0;; i++) {
                send_seq(&s, i, ++outstanding % 16 == 0);
                while (outstanding >= RQ - 16) {
                    struct ibv_wc wc = wait_wc(s.cq, TMO);
                    CHECK(wc.status == IBV_WC_SUCCESS, "SEND completed %s", ibv_wc_status_str(wc.status));
                    outstanding -= 16;
                }
            }
        }
        struct wside s;
        wside_open(&s);
        for (int i = 0; i < RQ; i++) post_slot(&s, (uint64_t)i);
        wside_connect(&s, up[0], down[1], 0xaa);
        char c = 'g';
        write_all(down[1], &c, 1);
        uint32_t next = 0, kill_at = 1000 + (uint32_t)(getpid() % 1000);
        struct ibv_wc wc;
        while (next_wc(&s, &wc, next < kill_at ? TMO : 1000, next >= kill_at)) {
            CHECK(wc.status == IBV_WC_SUCCESS && wc.opcode == IBV_WC_RECV, "completion %s opcode %d after %u",
                  ibv_wc_status_str(wc.status), wc.opcode, next);
            uint32_t got;
            memcpy(&got, s.buf + (wc.wr_id % RQ) * SLOT, sizeof got);
            CHECK(got == next, "message %u carries %u", next, got);
            post_slot(&s, wc.wr_id + RQ);
            if (++next == kill_at) CHECK_OK(kill(pid, SIGKILL));
        }
        int st;
        CHECK(waitpid(pid, &st, 0) == pid && WIFSIGNALED(st), "victim ended with status 0x%x", st);
        /* the dead peer cannot acknowledge: the SEND fails (at once here, after the retries on a fabric:
         * 8 tries of 67 ms, slower in an emulated guest) */
        send_seq(&s, 0, 1);
        int got;
        do /* (the receives flushed with it carry other wr_ids) */
            got = next_wc(&s, &wc, 3 * TMO, 1);
        while (got && wc.wr_id != 0);
        if (!got && !sr_object_count) {
            /* kernel rxe 6.1 neither acknowledges nor times out a SEND to the QP of a killed process */
            LOG("%u messages before and after the kill at %u; no completion for a SEND to the dead peer in %d ms "
                "(a known deviation of this device)", next, kill_at, 3 * TMO);
        } else {
            CHECK(got, "no completion for a SEND to the killed peer within %d ms", 3 * TMO);
            CHECK(wc.status != IBV_WC_SUCCESS, "SEND to the killed peer succeeded");
            LOG("%u messages before and after the kill at %u, SEND to the dead peer: %s", next, kill_at,
                ibv_wc_status_str(wc.status));
        }
        /* the error flushed the receives: take them before the QP goes */
        while (ibv_poll_cq(s.cq, 1, &wc) > 0)
            ;
        wside_close(&s);
        close(up[0]);
        close(up[1]);
        close(down[0]);
        close(down[1]);
    }
}
