/* SPDX-License-Identifier: Apache-2.0 */
/*
 * softrdma: a user-space software RDMA device behind the libibverbs ABI.
 *
 * Internal structures shared by the parts of the device. The layout follows
 * Linux Soft-RoCE (drivers/infiniband/sw/rxe): one file per part
 *   sr_device.c    device list, contexts, queries, async events, object counts
 *   sr_mr.c        protection domains, memory regions, key checks
 *   sr_mw.c        memory windows: bind, invalidate, rkey checks through a window
 *   sr_cq.c        completion queues and completion channels
 *   sr_qp.c        queue pairs, shared receive queues, the QP state machine
 *   sr_req.c       requester: send WQEs -> request messages
 *   sr_resp.c      responder: executes requests against local MRs and RECV WQEs
 *   sr_comp.c      completer: responses -> CQEs, RNR and transport retries
 *   sr_registry.c  the instance registry
 *   sr_net.c       the wire: connections (TCP between processes, shared memory on
 *                  one host, direct calls inside one process), handshakes, the output
 *                  queue and ACK coalescing
 *   sr_recv.c      receive: payload sources, frame checks and dispatch, busy polling
 *   sr_progress.c  the progress thread and its timers
 *                  (the wire's four parts share sr_net_int.h)
 *   sr_cm_*.c      librdmacm (built into librdmacm.so.1; its parts share sr_cm_int.h)
 */
#ifndef SR_H
#define SR_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/uio.h>
#include <unistd.h>

#include "sr_util.h"

#define SR_EXPORT __attribute__((visibility("default")))
#define SR_HIDDEN __attribute__((visibility("hidden")))

/* ---- device limits (ibv_query_device) ---------------------------------- */
#define SR_MAX_QP            65536
#define SR_MAX_QP_WR         16384
#define SR_MAX_SGE           32
#define SR_MAX_CQ            65536
#define SR_MAX_CQE           (1 << 20)
#define SR_MAX_MR            (1 << 20)
#define SR_MAX_MW            (1 << 20)
#define SR_MAX_PD            65536
#define SR_MAX_RD_ATOM       16
#define SR_MAX_SRQ           65536
#define SR_MAX_SRQ_WR        16384
#define SR_MAX_SRQ_SGE       32
#define SR_MAX_INLINE        256
#define SR_MAX_MSG_SZ        (1u << 31)
#define SR_MAX_GID           32
#define SR_MAX_DEVICES       2  /* softrdma0, and softrdma1 with SOFTRDMA_DEVICE1_ADDRS */
#define SR_VENDOR_ID         0xFFFFFF /* as rxe: perftest takes its generic path */
#define SR_VENDOR_PART_ID    0
#define SR_MAX_INSTANCES     255      /* QPN = instance << 16 | index */
#define SR_QPN_INDEX_BITS    16

enum sr_kind {
	SR_K_CONTEXT, SR_K_PD, SR_K_MR, SR_K_CQ, SR_K_COMP_CHANNEL, SR_K_QP,
	SR_K_SRQ, SR_K_CM_ID, SR_K_CM_CHANNEL, SR_K_MW, SR_K_NUM
};

/* magic values mark live objects so that use after destroy is detectable */
#define SR_MAGIC_PD  0x50445044u
#define SR_MAGIC_MR  0x4d524d52u
#define SR_MAGIC_MW  0x4d574d57u
#define SR_MAGIC_CQ  0x43514351u
#define SR_MAGIC_QP  0x51505150u
#define SR_MAGIC_SRQ 0x53525153u
#define SR_MAGIC_CH  0x43484348u
#define SR_MAGIC_DEAD 0xdeadbeefu

/* ---- debug trace -------------------------------------------------------- */
SR_HIDDEN extern int sr_debug;
#define sr_dbg(fmt, ...) SR_TRACE(sr_debug, "softrdma", fmt, ##__VA_ARGS__)

/* ---- objects ------------------------------------------------------------ */
struct sr_async_rec {                  /* a queued async event (sr_device.c) */
	struct sr_async_rec *next;
	void *element;
	int type;
};

struct sr_context {
	struct verbs_context vctx;      /* must be first: ibv_context is inside */
	int async_wfd;                  /* write end of the async event pipe (one byte per event) */
	pthread_mutex_t async_lock;     /* the queue below, its pipe count, objects' async counters */
	pthread_cond_t async_acked;     /* an affiliated async event was acknowledged */
	struct sr_async_rec *async_head, *async_tail;
	bool internal;                  /* opened by librdmacm, not counted */
	struct sr_context *next;        /* the open contexts (port events go to each) */
};

struct sr_pd {
	struct ibv_pd ibv;
	uint32_t magic;
	atomic_int users;               /* MRs, QPs, SRQs: dealloc -> EBUSY */
};

struct sr_mr {
	struct ibv_mr ibv;
	uint32_t magic;
	struct sr_pd *pd;
	int access;
	uint64_t iova;                  /* address the peer uses (iova) */
	atomic_int num_mw;              /* windows bound to it: dereg -> EINVAL (IBA 10.6.7.2.6) */
	uint64_t pinned_pages;          /* counted against RLIMIT_MEMLOCK (sr_mr.c) */
};

struct sr_qp;

enum sr_mw_state { SR_MW_FREE, SR_MW_VALID };

struct sr_mw {
	struct ibv_mw ibv;              /* ibv.rkey is the consumer's copy (type 2: the consumer keeps it) */
	uint32_t magic;
	struct sr_pd *pd;
	pthread_mutex_t lock;           /* everything below */
	enum sr_mw_state state;         /* type 1 is always VALID (unbound: length 0) */
	uint32_t rkey;                  /* the device's current rkey: index bits | consumer's 8-bit key */
	int access;                     /* IBV_ACCESS_REMOTE_* | IBV_ACCESS_ZERO_BASED */
	uint64_t addr, length;          /* MR iova range it grants */
	struct sr_mr *mr;               /* bound MR (its num_mw counts this window) */
	struct sr_qp *qp;               /* type 2: the QP it is bound to (a reference is held) */
};

/*
 * ibv.fd is an epoll set of the event pipe and the channel's doorbell (an
 * eventfd that same-host peers signal when they write to a ring while a CQ
 * of this channel is armed): a thread blocked on the channel wakes for
 * either, and ibv_get_cq_event receives for itself when it is the doorbell.
 */
struct sr_comp_channel {
	struct ibv_comp_channel ibv;
	uint32_t magic;
	int rfd, wfd;                   /* the event pipe: one CQ pointer per event */
	int slot;                       /* doorbell slot: bit (1 << slot) in the rings' rd_db */
	atomic_int users;               /* CQs attached */
};

struct sr_cq {
	struct ibv_cq ibv;
	uint32_t magic;
	pthread_mutex_t lock;
	struct ibv_wc *ring;
	uint32_t size, head, count;     /* ring capacity, next to poll, filled */
	int armed;                      /* 0, 1 = any, 2 = solicited only */
	bool overflow;
	atomic_int users;               /* QPs attached */
	struct sr_comp_channel *chan;
	atomic_int ev_pending;          /* events in the channel not read yet */
	atomic_bool zombie;             /* destroyed; freed when ev_pending drops to 0 */
	uint32_t comp_reported;         /* events returned by ibv_get_cq_event (ibv.mutex) */
	uint32_t async_reported, async_acked; /* affiliated async events (context's async_lock) */
};

/* one send WQE, as copied from the ibv_send_wr at post time */
struct sr_swqe {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	unsigned int send_flags;
	uint32_t imm_data;              /* network order, passed through */
	uint64_t remote_addr;
	uint32_t rkey;
	uint64_t compare_add, swap;
	uint32_t num_sge;
	uint64_t length;                /* total bytes */
	uint32_t psn;
	uint8_t  inline_used;
	uint8_t  local_err;             /* ibv_wc_status found while transmitting */
	uint8_t  local_done;            /* a local operation (bind, invalidate) was executed */
	uint32_t mw_rkey, mr_lkey;      /* BIND_MW: the window's rkey and the MR's lkey at post time */
	uint64_t mw_addr, mw_length;    /* BIND_MW: range; rkey above holds the new rkey */
	int mw_access;                  /* BIND_MW: window access flags */
	struct ibv_sge *sge;            /* points into the per-slot sge array */
	uint8_t *inl;                   /* inline copy (SR_MAX_INLINE bytes) */
};

struct sr_rwqe {
	uint64_t wr_id;
	uint32_t num_sge;
	struct ibv_sge *sge;
};

struct sr_rq {
	struct sr_rwqe *ring;
	struct ibv_sge *sges;
	uint32_t size, max_sge, head, count;
};

struct sr_srq {
	struct ibv_srq ibv;
	uint32_t magic;
	pthread_mutex_t lock;
	struct sr_pd *pd;
	struct sr_rq rq;
	uint32_t limit;                 /* armed srq_limit, 0 = disarmed */
	uint32_t async_reported, async_acked; /* affiliated async events (context's async_lock) */
	atomic_int users;               /* QPs attached */
};

struct sr_conn;

struct sr_qp {
	struct ibv_qp ibv;
	uint32_t magic;
	atomic_int refs;                /* table + lookups in flight */
	uint32_t async_reported, async_acked; /* affiliated async events (context's async_lock) */
	pthread_mutex_t lock;           /* state, queues, PSNs */
	pthread_mutex_t send_lock;      /* orders transmissions (taken before lock) */
	struct sr_pd *pd;
	struct sr_cq *scq, *rcq;
	struct sr_srq *srq;
	struct ibv_qp_cap cap;
	int sq_sig_all;

	/* modify_qp attributes */
	struct ibv_qp_attr attr;

	/* send queue: slots [comp, comp+count) in use; [send_idx..) not yet sent */
	/* send queue ring; free-running counters: head (oldest not completed)
	 * <= next (next to transmit) <= tail (next free slot) */
	struct sr_swqe *sq;
	struct ibv_sge *sq_sges;
	uint8_t *sq_inline;
	uint32_t sq_size, sq_head, sq_next, sq_tail;

	struct sr_rq rq;

	/* requester / completer */
	uint32_t next_psn;              /* next PSN to assign */
	int rnr_left;                   /* rnr retries left for the oldest WQE */
	int retry_left;                 /* transport retries left for the oldest WQE */
	bool rnr_wait;                  /* waiting for the RNR timer */
	uint64_t timer_deadline_ns;     /* RNR timer or transport timeout, 0 = none */
	uint64_t last_progress_ns;

	/* responder */
	uint32_t epsn;                  /* expected PSN */

	/* wire */
	uint32_t remote_inst;           /* instance of dest_qp_num */
	struct sr_conn *conn;           /* NULL: peer in this process */
};

/* ---- port counters (sr_counters.c): the names of kernel rxe's hw_counters --- */
enum sr_hwc {
	SR_HWC_SENT_PKTS, SR_HWC_RCVD_PKTS, SR_HWC_DUP_REQ, SR_HWC_OUT_OF_SEQ_REQ, SR_HWC_RCV_RNR,
	SR_HWC_SND_RNR, SR_HWC_RCV_SEQ_ERR, SR_HWC_ACK_DEFERRED, SR_HWC_RETRY_EXCEEDED,
	SR_HWC_RNR_RETRY_EXCEEDED, SR_HWC_COMP_RETRY, SR_HWC_SEND_ERR, SR_HWC_LINK_DOWNED,
	SR_HWC_RDMA_SEND, SR_HWC_RDMA_RECV, SR_HWC_NUM
};

/* rdma_recvs counts every successful receive completion (SEND or WRITE with immediate), as rxe */
/* one per thread that counts: its owner adds without a locked instruction, readers sum */
struct sr_hwc_block {
	_Atomic uint64_t v[SR_HWC_NUM];
	struct sr_hwc_block *next;
};

SR_HIDDEN extern __thread struct sr_hwc_block *sr_hwc_mine;
SR_HIDDEN struct sr_hwc_block *sr_hwc_block_new(void);

static inline void sr_hwc_add(enum sr_hwc c, uint64_t n)
{
	struct sr_hwc_block *b = sr_hwc_mine ? sr_hwc_mine : sr_hwc_block_new();

	if (b)
		atomic_store_explicit(&b->v[c], atomic_load_explicit(&b->v[c], memory_order_relaxed) + n,
				      memory_order_relaxed);
}

/* ---- globals: object table and counts ---------------------------------- */
SR_HIDDEN extern atomic_long sr_counts[SR_K_NUM];
SR_HIDDEN void sr_count(enum sr_kind k, int delta);
/*
 * A lock of a QP, CQ, SRQ or window: spins a little before it sleeps. Two
 * busy-polling threads take these in turn for sections of a few hundred
 * nanoseconds (a post, a poll, a CQE pushed by the peer's responder), where a
 * futex sleep and its wake-up cost more than the wait.
 */
SR_HIDDEN void sr_mutex_init(pthread_mutex_t *m);
SR_HIDDEN extern pthread_rwlock_t sr_mr_lock; /* held for reading while MR memory is accessed */

SR_HIDDEN void sr_init_once(void);
SR_HIDDEN struct ibv_context *sr_open(int dev, bool internal);
SR_HIDDEN uint64_t sr_now_ns(void);
SR_HIDDEN uint64_t sr_random64(void);
SR_HIDDEN void sr_async_event(struct ibv_context *ctx, enum ibv_event_type type, void *element);
/* devices by index (softrdma<index>), -1 for none of ours */
SR_HIDDEN int sr_dev_index(const struct ibv_device *device);
/* port 1 of the device is down (softrdma_set_port_state): its QPs' traffic goes nowhere, as on a link that is down */
SR_HIDDEN bool sr_dev_port_down(int dev);
/* the progress thread's look at the port control files (<rundir>/<device>-port1-down) */
SR_HIDDEN void sr_port_files_check(uint64_t now);
const char *softrdma_internal_rundir(void); /* sr_registry.c, exported for librdmacm.so.1 */
SR_HIDDEN extern atomic_int sr_ports_down; /* how many devices' ports are down: 0 makes the checks one load */
/* an object (QP, SRQ, CQ) is being destroyed: its unread async events are dropped, and the caller
 * waits until those already returned by ibv_get_async_event are acknowledged */
SR_HIDDEN void sr_async_forget(struct ibv_context *ctx, void *element, uint32_t *reported,
				 const uint32_t *acked);
SR_HIDDEN int sr_gid_count(int dev);
SR_HIDDEN int sr_gid_get(int dev, int index, union ibv_gid *gid);
SR_HIDDEN bool sr_gid_is_local(const union ibv_gid *gid);

/* names */
SR_HIDDEN const char *sr_qp_state_name(enum ibv_qp_state s);
SR_HIDDEN const char *sr_opcode_name(int op);

/* MR */
SR_HIDDEN struct sr_mr *sr_mr_lookup(uint32_t key);
/* resolve [addr, addr+len) through rkey (an MR's or a window's) for a request arriving on qp;
 * 0 or an ibv_wc_status */
SR_HIDDEN int sr_mr_check_remote(struct sr_qp *qp, uint32_t rkey, uint64_t addr, uint64_t len,
				 int access, uint8_t **out);
/* resolve a local SGE list into iovecs; 0 or IBV_WC_LOC_PROT_ERR */
SR_HIDDEN int sr_mr_sge_to_iov(struct sr_pd *pd, const struct ibv_sge *sge, uint32_t n,
			       bool need_write, struct iovec *iov, int *iovcnt);

/* MW (caller holds sr_mr_lock for reading) */
SR_HIDDEN bool sr_mw_key(uint32_t rkey);               /* the key names a window, not an MR */
/* resolve through a window's rkey: 0 or IBV_WC_REM_ACCESS_ERR */
SR_HIDDEN int sr_mw_check_remote(struct sr_qp *qp, uint32_t rkey, uint64_t addr, uint64_t len,
				 int access, uint8_t **out);
/* execute a BIND_MW WQE on qp: 0 or IBV_WC_MW_BIND_ERR */
SR_HIDDEN int sr_mw_bind(struct sr_qp *qp, const struct sr_swqe *w);
/* invalidate rkey: LOCAL_INV posted on qp, or (remote) SEND_WITH_INV arriving on qp; 0 or -1 */
SR_HIDDEN int sr_mw_invalidate(struct sr_qp *qp, uint32_t rkey, bool remote);
SR_HIDDEN struct ibv_mw *sr_alloc_mw(struct ibv_pd *pd, enum ibv_mw_type type);
SR_HIDDEN int sr_dealloc_mw(struct ibv_mw *mw);
SR_HIDDEN int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *mw, struct ibv_mw_bind *bind);

/* CQ */
SR_HIDDEN void sr_cq_push(struct sr_cq *cq, const struct ibv_wc *wc, bool solicited);

/* QP */
SR_HIDDEN struct sr_qp *sr_qp_get(uint32_t qpn);      /* lookup by number, takes a reference */
SR_HIDDEN void sr_qp_put(struct sr_qp *qp);
SR_HIDDEN void sr_qp_error(struct sr_qp *qp);           /* lock held: move to ERR + flush */
SR_HIDDEN void sr_qp_complete_send(struct sr_qp *qp, enum ibv_wc_status st); /* oldest WQE */
SR_HIDDEN bool sr_rq_pop(struct sr_qp *qp, struct sr_rwqe *out, struct ibv_sge *sge_out);
SR_HIDDEN void sr_qp_foreach(void (*fn)(struct sr_qp *qp, void *arg), void *arg);
SR_HIDDEN int sr_qp_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
SR_HIDDEN int sr_qp_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
SR_HIDDEN int sr_srq_post_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
SR_HIDDEN int sr_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc);
SR_HIDDEN int sr_req_notify_cq(struct ibv_cq *ibcq, int solicited_only);

/* ---- messages between requester and responder -------------------------- */
enum sr_op {
	SR_OP_HELLO = 1,
	SR_OP_SEND, SR_OP_WRITE, SR_OP_READ, SR_OP_CMP_SWP, SR_OP_FETCH_ADD,
	SR_OP_ACK, SR_OP_NAK, SR_OP_RNR_NAK, SR_OP_READ_RESP, SR_OP_ATOMIC_RESP,
	SR_OP_MAX
};

/* NAK syndromes (IBA 9.7.5.2.1 AETH NAK codes) */
enum sr_nak { SR_NAK_PSN_SEQ = 0, SR_NAK_INV_REQ = 1, SR_NAK_REM_ACCESS = 2, SR_NAK_REM_OP = 3 };

#define SR_F_IMM       0x01
#define SR_F_SOLICITED 0x02
#define SR_F_INV       0x04     /* SEND with invalidate: rkey holds the rkey to invalidate */
#define SR_WIRE_MAGIC  0x5352u  /* "SR" */

struct sr_hdr {
	uint16_t magic;
	uint8_t  op;
	uint8_t  flags;
	uint32_t syndrome;              /* NAK code, RNR timer, HELLO: instance */
	uint32_t src_qpn, dst_qpn;
	uint32_t psn;
	uint32_t imm;                   /* network order as in the WR */
	uint32_t rkey;
	uint32_t pad;
	uint64_t raddr;
	uint64_t len;                   /* payload bytes (READ: bytes requested) */
	uint64_t cmp_add, swap;         /* atomics; ATOMIC_RESP: original value */
} __attribute__((packed));
_Static_assert(sizeof(struct sr_hdr) == 64, "wire header size");

/* where a message's payload comes from: memory (same process) or a socket */
struct sr_src {
	const struct iovec *iov;
	int iovcnt, idx;
	size_t off;
	struct sr_conn *conn;
	uint64_t left;
};
SR_HIDDEN int sr_src_copy(struct sr_src *s, void *dst, size_t len);
SR_HIDDEN int sr_src_skip(struct sr_src *s, uint64_t len);

/* net */
SR_HIDDEN int sr_net_start(void);
SR_HIDDEN uint32_t sr_net_instance(void);
/* transmit a message from qp (requester or responder side) */
SR_HIDDEN int sr_net_send(struct sr_qp *qp, struct sr_hdr *h, const struct iovec *iov, int iovcnt);
/* reply on the path a request came from */
SR_HIDDEN bool sr_net_is_local(struct sr_qp *qp);
/* send_lock held: v holds whole messages (headers and payloads), consumed */
SR_HIDDEN int sr_net_send_batch(struct sr_qp *qp, struct iovec *v, int cnt);
SR_HIDDEN void sr_net_reply(struct sr_conn *conn, struct sr_hdr *h, const struct iovec *iov, int iovcnt);
SR_HIDDEN void sr_net_qp_connect(struct sr_qp *qp);
SR_HIDDEN void sr_net_qp_release(struct sr_qp *qp);
SR_HIDDEN void sr_net_kick_timer(void);
SR_HIDDEN int sr_net_poll(bool busy);
/* a busy poll_cq found nothing / found completions (yields the CPU to others after a while) */
SR_HIDDEN void sr_net_poll_empty(void);
SR_HIDDEN void sr_net_poll_found(void);
/* a thread armed a CQ (of a channel on doorbell slot `slot`, or -1) and is about to wait */
SR_HIDDEN void sr_net_stop_polling(int slot);
/* the process's doorbell eventfds (SR_DB_SLOTS, made once), handed to same-host peers */
SR_HIDDEN int sr_doorbell_fds(int *fds);
/* a CQ of a channel on doorbell slot `slot` is armed: the rings ring it; true if messages came in */
SR_HIDDEN bool sr_net_arm_doorbell(int slot);
/* no CQ waits on the doorbells of slot any more: the progress thread watches the rings again
 * (release: the slot's bit goes too) */
SR_HIDDEN void sr_net_doorbell_done(int slot, bool release);

/* engines */
SR_HIDDEN void sr_req_progress(struct sr_qp *qp);
SR_HIDDEN void sr_resp_handle(struct sr_conn *from, struct sr_hdr *h, struct sr_src *src);
SR_HIDDEN void sr_comp_handle(struct sr_hdr *h, struct sr_src *src);
SR_HIDDEN void sr_comp_timer(struct sr_qp *qp, uint64_t now);
SR_HIDDEN void sr_comp_peer_lost(struct sr_qp *qp);
SR_HIDDEN uint64_t sr_rnr_timer_ns(uint8_t code);
SR_HIDDEN uint64_t sr_timeout_ns(uint8_t code);

#endif
