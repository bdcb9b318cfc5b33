/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdmacm for softrdma0: what its parts share.
 *   sr_cm_api.c    event channels and events, ids, QPs, connect/accept/reject/disconnect, endpoints
 *   sr_cm_wire.c   the CM wire protocol (REQ/REP/RTU/REJ/DREQ/DREP) and the CM thread
 *   sr_cm_addr.c   addresses: bind, resolve, listen, ports, devices; rdma_getaddrinfo
 *   sr_cm_ports.c  the RDMA port space, apart from TCP's (claims in the registry directory)
 *   sr_cm_stubs.c  what is not offered: multicast, SRQ helpers, ECE, rsockets
 * Everything here is internal to librdmacm.so.1 (hidden).
 */
#ifndef SR_CM_INT_H
#define SR_CM_INT_H

#include "sr.h"
#include "sr_util.h"

#include <rdma/rdma_cma.h>
#include <sys/socket.h>

/* from libibverbs.so.1 (SOFTRDMA_1.0) */
struct ibv_context *softrdma_internal_open(int dev);
int softrdma_internal_device_count(void);
int softrdma_internal_device_of(const struct sockaddr *sa);
void softrdma_internal_count(int kind, int delta);
const char *softrdma_internal_rundir(void);
int softrdma_internal_port_down(struct ibv_context *ctx);

/* IBA CM private data sizes minus rdma_cm's 36-byte header (kernel limits) */
#define PDATA_REQ 56
#define PDATA_REP 196
#define PDATA_REJ 148
#define PDATA_MAX 196
#define IB_CM_REJ_CONSUMER_DEFINED 28
#define CONNECT_TIMEOUT_MS 5000
/* as IB CM times out a REP that no RTU answers (SOFTRDMA_CM_REP_TIMEOUT_MS overrides, for tests) */
#define REP_TIMEOUT_MS 15000

#define CM_MAGIC_ID 0x434d4944u
/* "SRM2": CM messages that carry the RDMA ports (a peer of the old format is cut off) */
#define CM_MSG_MAGIC 0x53524d32u
#define CM_MAGIC_CH 0x434d4348u

enum cm_msg_type { MSG_REQ = 1, MSG_REP, MSG_RTU, MSG_REJ, MSG_DREQ, MSG_DREP };

struct cm_msg {
	uint8_t type;
	uint8_t pdata_len;
	uint8_t responder_resources;
	uint8_t initiator_depth;
	uint8_t retry_count;
	uint8_t rnr_retry_count;
	uint8_t srq;
	uint8_t ps;                     /* the low byte of the port space */
	uint8_t tos;                    /* REQ: the requester's traffic class */
	uint32_t qpn;
	uint32_t psn;
	uint32_t magic;
	/* RDMA ports (network order): the sender's and the peer's; the TCP
	 * connection underneath runs between other port numbers */
	uint16_t src_port;
	uint16_t dst_port;
	uint8_t pdata[PDATA_MAX];
} __attribute__((packed));

enum cm_state {
	CMS_IDLE, CMS_BOUND, CMS_ADDR_QUERY, CMS_ADDR_RESOLVED, CMS_ROUTE_RESOLVED, CMS_LISTEN,
	CMS_CONNECTING, CMS_REQ_SENT, CMS_REQ_WAIT, CMS_REQ_RCVD, CMS_REP_RCVD, CMS_REP_SENT,
	CMS_ESTABLISHED, CMS_DISCONNECTED, CMS_REJECTED, CMS_ERROR, CMS_NUM
};

SR_HIDDEN extern const char *const cm_state_name[CMS_NUM];

struct cm_event {
	struct rdma_cm_event ev;
	struct cm_event *next;
	uint8_t pdata[PDATA_MAX];
};

struct cm_channel {
	struct rdma_event_channel ch;
	uint32_t magic;
	struct cm_event *head, *tail;
	bool internal;
};

struct cm_id {
	struct rdma_cm_id id;
	uint32_t magic;
	enum cm_state state;
	int fd;                         /* bound / listening / CM connection socket */
	/* the id's claim in the RDMA port space (sr_cm_ports.c); NULL: none (an
	 * accepted id, or an active one whose port is its CM connection's) */
	char *claim_path;
	int claim_fd;
	uint16_t claim_port;            /* host order */
	bool in_epoll;
	bool sync;                      /* created without a channel */
	struct cm_id *listen;           /* passive side: the listener it came from */
	bool passive;                   /* created by a connect request */
	uint64_t serial;                /* names the id in the CM thread's epoll set */
	uint64_t deadline_ns;           /* connecting: give up then */
	int reuseaddr, afonly;
	uint8_t ack_timeout;
	uint8_t tos;                    /* RDMA_OPTION_ID_TOS; passive: the REQ's */
	/* connection */
	struct rdma_conn_param param;   /* our side's */
	uint8_t pdata[PDATA_MAX];
	uint32_t remote_qpn, remote_psn, local_qpn, local_psn;
	uint8_t remote_resp_res, remote_init_depth, remote_retry, remote_rnr_retry;
	bool own_pd;
	struct ibv_qp_init_attr ep_attr; /* rdma_create_ep: QP for rdma_get_request ids */
	bool ep_has_attr;
	struct ibv_pd *ep_pd;
	/*
	 * A passive id whose CONNECT_REQUEST has not been retrieved yet: nobody
	 * knows it, its request travels with the listener (rdma_migrate_id) and
	 * dies with it (rdma_destroy_id), and as in the kernel's ucma no other
	 * event is reported for it (an accept just fails later).
	 */
	bool unclaimed;
	/* events retrieved by rdma_get_cm_event and acknowledged (cm_lock): as in
	 * librdmacm, rdma_destroy_id waits until every retrieved event is acked,
	 * so a thread holding an event may still use event->id (CONNECT_REQUEST
	 * counts for the listener, as event->listen_id) */
	unsigned int ev_reported, ev_acked;
	struct cm_id *all_next, *all_prev, *hash_next; /* all_ids, id_hash (cm_lock) */
	bool linked;
	/* the CM message being received: a peer may send it in pieces */
	uint8_t rbuf[sizeof(struct cm_msg)];
	size_t rlen;
};

/* ---- shared state (sr_cm_api.c) ---------------------------------------------- */
SR_HIDDEN extern pthread_mutex_t cm_lock;
SR_HIDDEN extern int cm_ep;
/* librdmacm's own context of each device (rdma_get_devices), by device index */
SR_HIDDEN extern struct ibv_context *cm_ctxs[];
SR_HIDDEN extern int cm_ndev;
/* the context of the device that owns an address (softrdma0 for any other) */
SR_HIDDEN struct ibv_context *cm_ctx_of(const struct sockaddr *sa);
SR_HIDDEN extern struct cm_id *all_ids;       /* cm_lock */
SR_HIDDEN extern int cm_debug;

#define cm_dbg(fmt, ...) SR_TRACE(cm_debug, "softrdma-cm", fmt, ##__VA_ARGS__)

static inline struct cm_id *to_id(struct rdma_cm_id *id)
{
	struct cm_id *c = (struct cm_id *)id;

	return id && c->magic == CM_MAGIC_ID ? c : NULL;
}

static inline struct cm_channel *to_ch(struct rdma_event_channel *ch)
{
	struct cm_channel *c = (struct cm_channel *)ch;

	return ch && c->magic == CM_MAGIC_CH ? c : NULL;
}

/* sr_cm_api.c */
SR_HIDDEN int cm_start(void);
SR_HIDDEN void id_link(struct cm_id *c);
SR_HIDDEN struct cm_id *id_by_serial(uint64_t serial);
SR_HIDDEN void id_unlink(struct cm_id *c);
SR_HIDDEN void set_state(struct cm_id *c, enum cm_state s);
SR_HIDDEN void queue_event(struct cm_id *c, enum rdma_cm_event_type type, int status,
			   struct cm_id *listen, const struct cm_msg *m, size_t pdata_size);
SR_HIDDEN int sync_wait(struct cm_id *c, enum rdma_cm_event_type want);
SR_HIDDEN struct cm_id *id_new(struct rdma_event_channel *channel, void *context,
			       enum rdma_port_space ps, enum ibv_qp_type qp_type);
SR_HIDDEN void id_close_fd(struct cm_id *c);
SR_HIDDEN void qp_to_error(struct cm_id *c);
SR_HIDDEN int modify_qp(struct cm_id *c, enum ibv_qp_state s);

/* sr_cm_wire.c */
SR_HIDDEN void send_msg(struct cm_id *c, struct cm_msg *m);
SR_HIDDEN void fill_msg(struct cm_id *c, struct cm_msg *m, uint8_t type);
SR_HIDDEN void *cm_thread(void *arg);

/* sr_cm_addr.c */
SR_HIDDEN socklen_t sa_len(const struct sockaddr *sa);
SR_HIDDEN bool sa_is_any(const struct sockaddr *sa);
SR_HIDDEN uint16_t sa_port(const struct sockaddr *sa);              /* host order */
SR_HIDDEN void sa_set_port(struct sockaddr *sa, uint16_t port);     /* host order */
SR_HIDDEN int connect_listener(struct cm_id *c);
SR_HIDDEN void sa_to_gid(const struct sockaddr *sa, union ibv_gid *gid);
SR_HIDDEN int gid_index_of(struct ibv_context *ctx, const union ibv_gid *gid);

/* sr_cm_ports.c: cm_lock held. port_bind claims src_addr's address with `port`
 * (0: a free one) and sets the port in src_addr; port_listen listens on the
 * id's socket and publishes it; port_lookup finds the TCP port of the listener
 * that an rdma_connect to dst reaches (-1, ENOENT: none) */
SR_HIDDEN int port_bind(struct cm_id *c, uint16_t port);
SR_HIDDEN int port_listen(struct cm_id *c, int backlog);
SR_HIDDEN void port_release(struct cm_id *c);
SR_HIDDEN int port_lookup(enum rdma_port_space ps, const struct sockaddr *dst, uint16_t *tcp_port);

#endif
