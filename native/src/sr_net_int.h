/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wire's parts (all in libibverbs.so.1, hidden), as Linux rxe keeps
 * rxe_net.c, rxe_recv.c and rxe_task.c apart:
 *   sr_registry.c  the instance registry ($SOFTRDMA_RUNDIR)
 *   sr_net.c       connections (TCP and same-host) and their handshakes, the
 *                  output queue and ACK coalescing, the send entry points
 *   sr_recv.c      receive: payload sources, frame checks and dispatch to the
 *                  responder and completer, busy polling
 *   sr_progress.c  the progress thread: its epoll loop, timers, parking; start-up
 */
#ifndef SR_NET_INT_H
#define SR_NET_INT_H

#include "sr.h"
#include "sr_shm.h"

#include <sys/types.h>

#define RBUF_SIZE      (64 * 1024)
#define IO_TIMEOUT_MS  30000 /* a peer that stalls mid-message this long is dropped */
#define CONNECT_TIMEOUT_MS 3000

struct sr_pending {
	struct sr_pending *next;
	size_t len, off;
	uint8_t data[];
};

struct sr_conn {
	int fd;
	uint32_t remote_inst;
	bool hello_done;
	atomic_bool dead;
	bool out_armed;
	bool parked;                    /* EPOLLIN off while threads busy-poll */
	bool killed;
	pthread_mutex_t rlock;          /* reader role: progress thread or a polling thread */
	pthread_mutex_t wlock;          /* writer role: one frame at a time */
	pthread_mutex_t qlock;          /* pending queue */
	struct sr_pending *qhead, *qtail;
	uint8_t *rbuf;
	size_t rpos, rend;
	bool big;                       /* last payload was large: read headers alone */
	bool has_ack;                   /* an ACK held back to be coalesced (rlock) */
	struct sr_hdr pending_ack;
	struct sr_conn *_Atomic all_next; /* live list; kept intact when unlinked */
	struct sr_conn *dead_next;
	/* same-host wire: fd is the Unix socket of the hand-over (watched for the peer's exit),
	 * the messages go through the rings */
	bool is_unix;
	atomic_bool shm_ready;          /* rings mapped (set once, under rlock) */
	atomic_bool peer_gone;          /* stops threads waiting on the rings */
	uint32_t scan_head;             /* rx head at the progress thread's last timer scan */
	struct sr_shm shm;
};

/* ---- sr_registry.c -------------------------------------------------------------- */
SR_HIDDEN extern uint32_t my_inst;
SR_HIDDEN bool sr_net_port_down(const struct sr_hdr *h);
SR_HIDDEN extern dev_t rundir_dev;
SR_HIDDEN extern ino_t rundir_ino;
SR_HIDDEN extern uint16_t my_port;
SR_HIDDEN extern char rundir[256];
SR_HIDDEN int claim_instance(void);
SR_HIDDEN int registry_port(uint32_t inst, int *pid_out);

/* ---- sr_net.c ------------------------------------------------------------------- */
SR_HIDDEN extern int listen_fd, ep_fd, unix_fd;
SR_HIDDEN extern pthread_mutex_t conn_lock;
SR_HIDDEN extern struct sr_conn *conn_by_inst[SR_MAX_INSTANCES + 1];
/* live connections, walked without a lock by polling threads; dead ones are
 * unlinked but never freed (QPs and walkers may still point to them) */
SR_HIDDEN extern struct sr_conn *_Atomic all_conns;
/* set in the progress thread and while a polling thread runs the input path:
 * such threads never block on a full socket */
SR_HIDDEN extern __thread bool no_block;
SR_HIDDEN bool flush_all_pending(void);
SR_HIDDEN void arm_out(struct sr_conn *c, bool on);
SR_HIDDEN bool queue_empty(struct sr_conn *c);
SR_HIDDEN void writer_release(struct sr_conn *c, bool blocking);
SR_HIDDEN int conn_send(struct sr_conn *c, struct sr_hdr *h, const struct iovec *iov, int cnt);
SR_HIDDEN struct sr_conn *conn_new(int fd);
SR_HIDDEN void conn_kill(struct sr_conn *c, const char *why);
SR_HIDDEN void shm_accept_hello(struct sr_conn *c);
SR_HIDDEN void flush_ack(struct sr_conn *c);
SR_HIDDEN void unix_listen(void);

/* ---- sr_recv.c ------------------------------------------------------------------ */
SR_HIDDEN int conn_read(struct sr_conn *c, void *dst, size_t len);
SR_HIDDEN int shm_input(struct sr_conn *c);
SR_HIDDEN int conn_input(struct sr_conn *c);

static inline uint64_t payload_len(const struct sr_hdr *h)
{
	return (h->op == SR_OP_SEND || h->op == SR_OP_WRITE || h->op == SR_OP_READ_RESP) ? h->len : 0;
}

/* ---- sr_progress.c -------------------------------------------------------------- */
/* last time a thread polled the sockets itself (poll_cq on an empty CQ) */
SR_HIDDEN extern _Atomic uint64_t last_poll_ns;
#define POLL_PARK_NS 200000ull
SR_HIDDEN extern atomic_int tcp_parked;           /* TCP connections with EPOLLIN off (progress thread) */

#endif
