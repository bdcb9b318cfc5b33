/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdmacm for softrdma0.
 *
 * Addresses are IP addresses; a listening id is a real TCP listening socket
 * on its address and port (so bind/listen have real semantics: EADDRINUSE,
 * ephemeral ports). Each connection has its own TCP connection to the
 * listener, which carries the CM exchange
 *     REQ ->  <- REP  RTU ->     (or <- REJ)      DREQ <-> DREP
 * as fixed-size messages; its EOF means the peer is gone (DISCONNECTED).
 * A CM thread (epoll) runs the protocol and queues events on the channels.
 * Every CM socket is non-blocking and a message is collected piecewise, so a
 * peer that stalls inside a message holds up only its own connection: no
 * socket call ever waits under cm_lock;
 * an event channel is an eventfd in semaphore mode, one count per queued
 * event (a thread blocked on a destroyed channel stays blocked, as with the
 * kernel's rdma_cm file).
 */
#define _GNU_SOURCE
#include "sr.h"
#include "sr_util.h"

#include <rdma/rdma_cma.h>
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/select.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

/* from libibverbs.so.1 (SOFTRDMA_1.0) */
struct ibv_context *softrdma_internal_open(void);
void softrdma_internal_count(int kind, int delta);

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
	uint8_t pad;
	uint32_t qpn;
	uint32_t psn;
	uint32_t magic;
	uint8_t pdata[PDATA_MAX];
} __attribute__((packed));

enum cm_state {
	CMS_IDLE, CMS_BOUND, CMS_ADDR_QUERY, CMS_ADDR_RESOLVED, CMS_ROUTE_RESOLVED, CMS_LISTEN,
	CMS_CONNECTING, CMS_REQ_SENT, CMS_REQ_WAIT, CMS_REQ_RCVD, CMS_REP_RCVD, CMS_REP_SENT,
	CMS_ESTABLISHED, CMS_DISCONNECTED, CMS_REJECTED, CMS_ERROR, CMS_NUM
};

static const char *const cm_state_name[CMS_NUM] = {
	"IDLE", "BOUND", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_RESOLVED", "LISTEN", "CONNECTING",
	"REQ_SENT", "REQ_WAIT", "REQ_RCVD", "REP_RCVD", "REP_SENT", "ESTABLISHED", "DISCONNECTED",
	"REJECTED", "ERROR",
};

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
	bool in_epoll;
	bool sync;                      /* created without a channel */
	struct cm_id *listen;           /* passive side: the listener it came from */
	bool passive;                   /* created by a connect request */
	uint64_t serial;                /* names the id in the CM thread's epoll set */
	uint64_t deadline_ns;           /* connecting: give up then */
	int reuseaddr, afonly;
	uint8_t ack_timeout;
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

static pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cm_acked = PTHREAD_COND_INITIALIZER; /* an event was acknowledged */
static pthread_once_t cm_once = PTHREAD_ONCE_INIT;
static int cm_ep = -1;
static struct ibv_context *cm_ctx;
static int cm_err;
static struct cm_id *all_ids;       /* cm_lock */
#define ID_HASH 4096                /* ids by serial: the CM thread finds an event's id in O(1) */
static struct cm_id *id_hash[ID_HASH];

static uint32_t random_psn(void)
{
	return (uint32_t)sr_entropy64() & 0xffffff;
}

static void id_link(struct cm_id *c)
{
	static uint64_t serials;
	struct cm_id **h;

	c->serial = ++serials;
	c->all_prev = NULL;
	c->all_next = all_ids;
	if (all_ids)
		all_ids->all_prev = c;
	all_ids = c;
	h = &id_hash[c->serial % ID_HASH];
	c->hash_next = *h;
	*h = c;
	c->linked = true;
}

static struct cm_id *id_by_serial(uint64_t serial)
{
	for (struct cm_id *c = id_hash[serial % ID_HASH]; c; c = c->hash_next)
		if (c->serial == serial)
			return c;
	return NULL;
}

static void id_unlink(struct cm_id *c)
{
	if (!c->linked)
		return;
	c->linked = false;
	if (c->all_prev)
		c->all_prev->all_next = c->all_next;
	else
		all_ids = c->all_next;
	if (c->all_next)
		c->all_next->all_prev = c->all_prev;
	for (struct cm_id **pp = &id_hash[c->serial % ID_HASH]; *pp; pp = &(*pp)->hash_next) {
		if (*pp == c) {
			*pp = c->hash_next;
			break;
		}
	}
}

#define cm_dbg(fmt, ...) SR_TRACE(cm_debug, "softrdma-cm", fmt, ##__VA_ARGS__)
static int cm_debug;

static void *cm_thread(void *arg);

static void cm_init(void)
{
	const char *d = getenv("SOFTRDMA_DEBUG");
	pthread_t th;
	pthread_attr_t at;

	cm_debug = d && *d && *d != '0';
	cm_ctx = softrdma_internal_open();
	cm_ep = epoll_create1(EPOLL_CLOEXEC);
	if (!cm_ctx || cm_ep < 0) {
		cm_err = errno ? errno : ENODEV;
		return;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, cm_thread, NULL))
		cm_err = errno ? errno : EAGAIN;
	pthread_attr_destroy(&at);
}

static int cm_start(void)
{
	pthread_once(&cm_once, cm_init);
	if (cm_err) {
		errno = cm_err;
		return -1;
	}
	return 0;
}

static struct cm_id *to_id(struct rdma_cm_id *id)
{
	struct cm_id *c = (struct cm_id *)id;

	return id && c->magic == CM_MAGIC_ID ? c : NULL;
}

static struct cm_channel *to_ch(struct rdma_event_channel *ch)
{
	struct cm_channel *c = (struct cm_channel *)ch;

	return ch && c->magic == CM_MAGIC_CH ? c : NULL;
}

static void set_state(struct cm_id *c, enum cm_state s)
{
	if (c->state != s)
		cm_dbg("id %p: %s -> %s", (void *)c, cm_state_name[c->state], cm_state_name[s]);
	c->state = s;
}

/* ---- events ----------------------------------------------------------------- */
/* cm_lock held */
static void queue_event(struct cm_id *c, enum rdma_cm_event_type type, int status,
			struct cm_id *listen, const struct cm_msg *m, size_t pdata_size)
{
	struct cm_channel *ch = (struct cm_channel *)c->id.channel;
	struct cm_event *e;
	uint64_t one = 1;

	if (!ch)
		return;
	if (c->unclaimed && type != RDMA_CM_EVENT_CONNECT_REQUEST) {
		cm_dbg("event %s for unclaimed id %p dropped", rdma_event_str(type), (void *)c);
		return;
	}
	e = calloc(1, sizeof(*e));
	if (!e)
		return;
	e->ev.id = &c->id;
	e->ev.listen_id = listen ? &listen->id : NULL;
	e->ev.event = type;
	e->ev.status = status;
	if (m) {
		/*
		 * As on IB/RoCE the consumer sees the whole private data area
		 * (56, 196 or 148 bytes), zero-padded after what the peer sent.
		 */
		memcpy(e->pdata, m->pdata, m->pdata_len);
		e->ev.param.conn.private_data = e->pdata;
		e->ev.param.conn.private_data_len = (uint8_t)pdata_size;
		e->ev.param.conn.responder_resources = m->initiator_depth;
		e->ev.param.conn.initiator_depth = m->responder_resources;
		e->ev.param.conn.flow_control = 1;
		e->ev.param.conn.retry_count = m->retry_count;
		e->ev.param.conn.rnr_retry_count = m->rnr_retry_count;
		e->ev.param.conn.srq = m->srq;
		e->ev.param.conn.qp_num = m->qpn;
	}
	cm_dbg("event %s status %d for id %p", rdma_event_str(type), status, (void *)c);
	if (ch->tail)
		ch->tail->next = e;
	else
		ch->head = e;
	ch->tail = e;
	if (write(ch->ch.fd, &one, sizeof(one)) != sizeof(one))
		cm_dbg("event channel full");
}

SR_EXPORT struct rdma_event_channel *rdma_create_event_channel(void)
{
	struct cm_channel *ch;

	if (cm_start())
		return NULL;
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	ch->ch.fd = eventfd(0, EFD_CLOEXEC | EFD_SEMAPHORE);
	if (ch->ch.fd < 0) {
		free(ch);
		return NULL;
	}
	ch->magic = CM_MAGIC_CH;
	softrdma_internal_count(SR_K_CM_CHANNEL, 1);
	return &ch->ch;
}

SR_EXPORT void rdma_destroy_event_channel(struct rdma_event_channel *channel)
{
	struct cm_channel *ch = to_ch(channel);
	struct cm_event *e;

	if (!ch)
		return;
	pthread_mutex_lock(&cm_lock);
	ch->magic = 0;
	while ((e = ch->head)) {
		ch->head = e->next;
		free(e);
	}
	pthread_mutex_unlock(&cm_lock);
	close(ch->ch.fd);
	softrdma_internal_count(SR_K_CM_CHANNEL, -1);
	free(ch);
}

/* the id whose count an event is on: a CONNECT_REQUEST is the listener's, as in librdmacm */
static struct cm_id *event_owner(struct cm_event *e)
{
	return (struct cm_id *)(e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST ? e->ev.listen_id : e->ev.id);
}

SR_EXPORT int rdma_get_cm_event(struct rdma_event_channel *channel, struct rdma_cm_event **event)
{
	struct cm_channel *ch = to_ch(channel);

	if (!ch || !event) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		struct pollfd pfd = { .fd = ch->ch.fd, .events = POLLIN };
		struct cm_event *e;
		uint64_t v;
		int fl = fcntl(ch->ch.fd, F_GETFL);

		/* blocking unless the caller made the channel's fd non-blocking */
		if (fl < 0 || (!(fl & O_NONBLOCK) && poll(&pfd, 1, -1) < 0))
			return -1;
		/*
		 * The eventfd's count is changed only under cm_lock and always
		 * equals the number of queued events (queue_event, withdraw_events,
		 * rdma_migrate_id): the read below never blocks, and the fd is
		 * readable exactly when an event is queued, as the kernel's file.
		 */
		pthread_mutex_lock(&cm_lock);
		e = ch->head;
		if (e) {
			if (read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
				cm_dbg("event channel out of step");
			ch->head = e->next;
			if (!ch->head)
				ch->tail = NULL;
			e->next = NULL;
			if (e->ev.event == RDMA_CM_EVENT_CONNECT_REQUEST) {
				/* the new id now belongs to the consumer, on the
				 * channel its request was delivered on */
				struct cm_id *child = (struct cm_id *)e->ev.id;

				child->unclaimed = false;
				child->id.channel = &ch->ch;
			}
			event_owner(e)->ev_reported++;
		}
		pthread_mutex_unlock(&cm_lock);
		if (e) {
			*event = &e->ev;
			return 0;
		}
		if (fl & O_NONBLOCK) {
			errno = EAGAIN;
			return -1;
		}
		/* another thread took the event: wait for the next */
	}
}

SR_EXPORT int rdma_ack_cm_event(struct rdma_cm_event *event)
{
	struct cm_event *e = (struct cm_event *)event;

	if (!event) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	event_owner(e)->ev_acked++;
	pthread_cond_broadcast(&cm_acked);
	pthread_mutex_unlock(&cm_lock);
	free(e);
	return 0;
}

SR_EXPORT const char *rdma_event_str(enum rdma_cm_event_type event)
{
	static const char *const n[] = {
		"RDMA_CM_EVENT_ADDR_RESOLVED", "RDMA_CM_EVENT_ADDR_ERROR",
		"RDMA_CM_EVENT_ROUTE_RESOLVED", "RDMA_CM_EVENT_ROUTE_ERROR",
		"RDMA_CM_EVENT_CONNECT_REQUEST", "RDMA_CM_EVENT_CONNECT_RESPONSE",
		"RDMA_CM_EVENT_CONNECT_ERROR", "RDMA_CM_EVENT_UNREACHABLE",
		"RDMA_CM_EVENT_REJECTED", "RDMA_CM_EVENT_ESTABLISHED",
		"RDMA_CM_EVENT_DISCONNECTED", "RDMA_CM_EVENT_DEVICE_REMOVAL",
		"RDMA_CM_EVENT_MULTICAST_JOIN", "RDMA_CM_EVENT_MULTICAST_ERROR",
		"RDMA_CM_EVENT_ADDR_CHANGE", "RDMA_CM_EVENT_TIMEWAIT_EXIT",
	};
	if ((unsigned)event > RDMA_CM_EVENT_TIMEWAIT_EXIT)
		return "UNKNOWN EVENT";
	return n[event];
}

/* sync ids (no channel): wait for this id's next event; 0 if it is `want` */
static int sync_wait(struct cm_id *c, enum rdma_cm_event_type want)
{
	struct rdma_cm_event *ev;
	int ret = 0;

	if (!c->sync)
		return 0;
	if (rdma_get_cm_event(c->id.channel, &ev))
		return -1;
	if (ev->event != want) {
		errno = ev->status ? -ev->status : ECONNREFUSED;
		if (ev->event == RDMA_CM_EVENT_REJECTED)
			errno = ECONNREFUSED;
		ret = -1;
	}
	rdma_ack_cm_event(ev);
	return ret;
}

/* ---- ids ---------------------------------------------------------------------- */
static struct cm_id *id_new(struct rdma_event_channel *channel, void *context,
			    enum rdma_port_space ps, enum ibv_qp_type qp_type)
{
	struct cm_id *c = calloc(1, sizeof(*c));

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	if (!channel) {
		channel = rdma_create_event_channel();
		if (!channel) {
			free(c);
			return NULL;
		}
		((struct cm_channel *)channel)->internal = true;
		c->sync = true;
	}
	c->id.channel = channel;
	c->id.context = context;
	c->id.ps = ps;
	c->id.qp_type = qp_type;
	c->fd = -1;
	c->ack_timeout = 14;
	c->magic = CM_MAGIC_ID;
	softrdma_internal_count(SR_K_CM_ID, 1);
	return c;
}

SR_EXPORT int rdma_create_id(struct rdma_event_channel *channel, struct rdma_cm_id **id,
			     void *context, enum rdma_port_space ps)
{
	struct cm_id *c;

	if (!id || (channel && !to_ch(channel))) {
		errno = EINVAL;
		return -1;
	}
	if (ps != RDMA_PS_TCP && ps != RDMA_PS_IB) {
		errno = EPROTONOSUPPORT;
		return -1;
	}
	if (cm_start())
		return -1;
	c = id_new(channel, context, ps, IBV_QPT_RC);
	if (!c)
		return -1;
	pthread_mutex_lock(&cm_lock);
	id_link(c);
	pthread_mutex_unlock(&cm_lock);
	*id = &c->id;
	return 0;
}

static void id_close_fd(struct cm_id *c)
{
	if (c->fd >= 0) {
		if (c->in_epoll)
			epoll_ctl(cm_ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	c->fd = -1;
	c->in_epoll = false;
}

/*
 * A connection carries a handful of messages, far below its socket buffer: one
 * that does not go out at once means a peer that stopped reading. The
 * connection is then cut (the CM thread sees it end) rather than waited for.
 */
static void send_msg(struct cm_id *c, struct cm_msg *m)
{
	ssize_t n;

	m->magic = 0x53524d43; /* "SRMC" */
	if (c->fd < 0)
		return;
	do
		n = send(c->fd, m, sizeof(*m), MSG_NOSIGNAL | MSG_DONTWAIT);
	while (n < 0 && errno == EINTR);
	if (n != sizeof(*m)) {
		cm_dbg("id %p: CM message %d not sent, connection cut", (void *)c, m->type);
		shutdown(c->fd, SHUT_RDWR);
	}
}

static void qp_to_error(struct cm_id *c)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

	if (c->id.qp)
		ibv_modify_qp(c->id.qp, &a, IBV_QP_STATE);
}

/* withdraw queued, undelivered events of an id that goes away; cm_lock held */
static void withdraw_events(struct cm_id *c)
{
	struct cm_channel *ch = to_ch(c->id.channel);
	struct cm_event **pp, *e;

	if (!ch)
		return;
	for (pp = &ch->head; (e = *pp);) {
		if (e->ev.id == &c->id || e->ev.listen_id == &c->id) {
			uint64_t v;

			*pp = e->next;
			/* the channel's count follows its queue (see rdma_get_cm_event) */
			if (read(ch->ch.fd, &v, sizeof(v)) != sizeof(v))
				cm_dbg("withdraw: channel out of step");
			if (e->ev.listen_id == &c->id && e->ev.id != &c->id) {
				/* an unclaimed connect request dies with its listener */
				struct cm_id *child = (struct cm_id *)e->ev.id;

				id_close_fd(child);
				id_unlink(child);
				child->magic = 0;
				softrdma_internal_count(SR_K_CM_ID, -1);
				free(child);
			}
			free(e);
		} else {
			pp = &e->next;
		}
	}
	ch->tail = NULL;
	for (e = ch->head; e; e = e->next)
		ch->tail = e;
}

SR_EXPORT int rdma_destroy_id(struct rdma_cm_id *id)
{
	struct cm_id *c = to_id(id);
	struct rdma_event_channel *own = NULL;
	bool listener;

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	listener = c->state == CMS_LISTEN;
	if (c->state == CMS_ESTABLISHED) {
		struct cm_msg m = { .type = MSG_DREQ };

		send_msg(c, &m);
	} else if (c->state == CMS_REQ_RCVD) {
		struct cm_msg m = { .type = MSG_REJ };

		send_msg(c, &m);
	}
	id_close_fd(c);
	withdraw_events(c);
	id_unlink(c);
	/* connections accepted by a listener that goes away lose their parent;
	 * those whose REQ has not even arrived die with it */
	for (struct cm_id *child = listener ? all_ids : NULL, *next; child; child = next) {
		next = child->all_next;
		if (child->listen != c)
			continue;
		child->listen = NULL;
		if (child->state == CMS_REQ_WAIT) {
			id_unlink(child);
			id_close_fd(child);
			child->magic = 0;
			softrdma_internal_count(SR_K_CM_ID, -1);
			free(child);
		}
	}
	c->magic = 0;
	if (c->sync)
		own = c->id.channel;
	/*
	 * As librdmacm: wait until every event retrieved for this id has been
	 * acknowledged; another thread may still be reading event->id (or, for a
	 * CONNECT_REQUEST, event->listen_id). rdma_cm(7): "Destruction of an
	 * rdma_cm_id will block until related events have been acknowledged."
	 */
	while (c->ev_acked != c->ev_reported)
		pthread_cond_wait(&cm_acked, &cm_lock);
	pthread_mutex_unlock(&cm_lock);
	if (c->own_pd && c->id.pd && !c->id.qp)
		ibv_dealloc_pd(c->id.pd);
	if (own)
		rdma_destroy_event_channel(own);
	softrdma_internal_count(SR_K_CM_ID, -1);
	free(c);
	return 0;
}

SR_EXPORT int rdma_migrate_id(struct rdma_cm_id *id, struct rdma_event_channel *channel)
{
	struct cm_id *c = to_id(id);
	struct cm_channel *from, *to;
	struct cm_event **pp, *e;
	struct rdma_event_channel *old_own = NULL;

	if (!c || (channel && !to_ch(channel))) {
		errno = EINVAL;
		return -1;
	}
	if (!channel) {
		channel = rdma_create_event_channel();
		if (!channel)
			return -1;
		((struct cm_channel *)channel)->internal = true;
	}
	pthread_mutex_lock(&cm_lock);
	from = to_ch(c->id.channel);
	to = to_ch(channel);
	/* queued events follow the id to its new channel; a listener's pending
	 * connect requests are its own events (as in the kernel's ucma) */
	for (pp = &from->head; (e = *pp);) {
		if (e->ev.id == &c->id || e->ev.listen_id == &c->id) {
			uint64_t b;

			*pp = e->next;
			e->next = NULL;
			if (read(from->ch.fd, &b, sizeof(b)) != sizeof(b))
				cm_dbg("migrate: channel out of step");
			if (to->tail)
				to->tail->next = e;
			else
				to->head = e;
			to->tail = e;
			b = 1;
			if (write(to->ch.fd, &b, sizeof(b)) != sizeof(b))
				cm_dbg("migrate: event channel full");
		} else {
			pp = &e->next;
		}
	}
	from->tail = NULL;
	for (e = from->head; e; e = e->next)
		from->tail = e;
	if (c->sync)
		old_own = c->id.channel;
	c->sync = to->internal;
	c->id.channel = channel;
	pthread_mutex_unlock(&cm_lock);
	if (old_own)
		rdma_destroy_event_channel(old_own);
	return 0;
}

SR_EXPORT int rdma_set_option(struct rdma_cm_id *id, int level, int optname, void *optval,
			      size_t optlen)
{
	struct cm_id *c = to_id(id);

	if (!c || !optval) {
		errno = EINVAL;
		return -1;
	}
	if (level == RDMA_OPTION_ID) {
		switch (optname) {
		case RDMA_OPTION_ID_TOS:
			return optlen == 1 ? 0 : (errno = EINVAL, -1);
		case RDMA_OPTION_ID_REUSEADDR:
			if (optlen != sizeof(int))
				break;
			c->reuseaddr = *(int *)optval;
			return 0;
		case RDMA_OPTION_ID_AFONLY:
			if (optlen != sizeof(int))
				break;
			c->afonly = *(int *)optval;
			return 0;
		case RDMA_OPTION_ID_ACK_TIMEOUT:
			if (optlen != 1)
				break;
			c->ack_timeout = *(uint8_t *)optval;
			return 0;
		default:
			errno = ENOSYS;
			return -1;
		}
		errno = EINVAL;
		return -1;
	}
	errno = ENOSYS;
	return -1;
}

/* ---- addresses ---------------------------------------------------------------- */
static socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

static bool sa_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

static void sa_to_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

static int gid_index_of(const union ibv_gid *gid)
{
	union ibv_gid g;

	for (int i = 0; ibv_query_gid(cm_ctx, 1, i, &g) == 0; i++)
		if (!memcmp(&g, gid, sizeof(g)))
			return i;
	return 0;
}

/* cm_lock held: a TCP socket bound to addr gives port semantics; no_port: the ephemeral port is
 * chosen by connect() (IP_BIND_ADDRESS_NO_PORT) */
static int bind_socket(struct cm_id *c, const struct sockaddr *addr, bool no_port)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd, one = 1;

	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	/*
	 * rdma_cm ports know no TCP TIME_WAIT: without SO_REUSEADDR a server could
	 * not listen again on its port right after its connections closed. Two
	 * listeners on one address and port still get EADDRINUSE.
	 */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/*
	 * An explicit bind to port 0 makes the kernel check the new port against
	 * every socket bound on the address (O(n): with 10 000 connections open it
	 * was most of the set-up time); an active side's port only matters once
	 * it connects, and connect() picks one by its 4-tuple hash.
	 */
	if (no_port)
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (addr->sa_family == AF_INET6) {
		int v6only = c->afonly;

		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	}
	if (bind(fd, addr, sa_len(addr)) || getsockname(fd, (struct sockaddr *)&ss, &len)) {
		int e = errno;

		close(fd);
		errno = e == EADDRNOTAVAIL ? EADDRNOTAVAIL : e;
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	memcpy(&c->id.route.addr.src_storage, &ss, len);
	return 0;
}

SR_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *c = to_id(id);
	int ret;

	if (!c || !addr) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_IDLE) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	ret = bind_socket(c, addr, false);
	if (!ret) {
		set_state(c, CMS_BOUND);
		/* a specific address belongs to the device; the wildcard to none yet */
		if (!sa_is_any(addr))
			c->id.verbs = cm_ctx;
		c->id.port_num = 1;
	}
	pthread_mutex_unlock(&cm_lock);
	return ret;
}

SR_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *c = to_id(id);
	struct sockaddr_storage src;
	socklen_t len = sizeof(src);
	int fd, ok;

	(void)timeout_ms;
	if (!c || !dst_addr || (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_IDLE && c->state != CMS_BOUND) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	memcpy(&c->id.route.addr.dst_storage, dst_addr, sa_len(dst_addr));
	/* the route the kernel would take tells the source address */
	fd = socket(dst_addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ok = fd >= 0 && !connect(fd, dst_addr, sa_len(dst_addr)) &&
	     !getsockname(fd, (struct sockaddr *)&src, &len);
	if (fd >= 0)
		close(fd);
	if (ok && c->state == CMS_IDLE) {
		if (src_addr && src_addr->sa_family == dst_addr->sa_family) {
			memcpy(&src, src_addr, sa_len(src_addr));
		} else if (src.ss_family == AF_INET) {
			((struct sockaddr_in *)&src)->sin_port = 0;
		} else {
			((struct sockaddr_in6 *)&src)->sin6_port = 0;
		}
		ok = !bind_socket(c, (struct sockaddr *)&src, true);
	}
	set_state(c, CMS_ADDR_QUERY);
	if (ok) {
		c->id.verbs = cm_ctx;
		c->id.port_num = 1;
		set_state(c, CMS_ADDR_RESOLVED);
		queue_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, NULL, 0);
	} else {
		set_state(c, CMS_IDLE);
		queue_event(c, RDMA_CM_EVENT_ADDR_ERROR, -(errno ? errno : EHOSTUNREACH), NULL, NULL, 0);
	}
	pthread_mutex_unlock(&cm_lock);
	return sync_wait(c, RDMA_CM_EVENT_ADDR_RESOLVED);
}

SR_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *c = to_id(id);

	(void)timeout_ms;
	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_ADDR_RESOLVED) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	set_state(c, CMS_ROUTE_RESOLVED);
	queue_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, NULL, 0);
	pthread_mutex_unlock(&cm_lock);
	return sync_wait(c, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

SR_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *c = to_id(id);
	struct epoll_event ev = { .events = EPOLLIN };

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state == CMS_IDLE) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		if (bind_socket(c, (struct sockaddr *)&any, false)) {
			pthread_mutex_unlock(&cm_lock);
			return -1;
		}
		set_state(c, CMS_BOUND);
	}
	if (c->state != CMS_BOUND || listen(c->fd, backlog > 0 ? backlog : 128)) {
		pthread_mutex_unlock(&cm_lock);
		errno = c->state != CMS_BOUND ? EINVAL : errno;
		return -1;
	}
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	ev.data.u64 = c->serial;
	epoll_ctl(cm_ep, EPOLL_CTL_ADD, c->fd, &ev);
	c->in_epoll = true;
	set_state(c, CMS_LISTEN);
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

SR_EXPORT uint16_t rdma_get_src_port(struct rdma_cm_id *id)
{
	if (!id)
		return 0;
	return id->route.addr.src_addr.sa_family == AF_INET6 ? id->route.addr.src_sin6.sin6_port :
							       id->route.addr.src_sin.sin_port;
}

SR_EXPORT uint16_t rdma_get_dst_port(struct rdma_cm_id *id)
{
	if (!id)
		return 0;
	return id->route.addr.dst_addr.sa_family == AF_INET6 ? id->route.addr.dst_sin6.sin6_port :
							       id->route.addr.dst_sin.sin_port;
}

SR_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;

	if (cm_start())
		return NULL;
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = cm_ctx;
	if (num_devices)
		*num_devices = 1;
	return list;
}

SR_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* ---- QPs ---------------------------------------------------------------------- */
/* what librdmacm gets from the kernel for each transition (rdma_init_qp_attr) */
static int init_qp_attr(struct cm_id *c, struct ibv_qp_attr *a, int *mask)
{
	enum ibv_qp_state want = a->qp_state;

	memset(a, 0, sizeof(*a));
	a->qp_state = want;
	switch (want) {
	case IBV_QPS_INIT:
		a->pkey_index = 0;
		a->port_num = 1;
		/* softrdma grants every remote access at the QP level; MRs decide */
		a->qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
				     IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_LOCAL_WRITE;
		*mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 0;
	case IBV_QPS_RTR: {
		union ibv_gid sgid;

		if (c->state < CMS_REQ_SENT || !c->remote_qpn)
			break;
		a->path_mtu = IBV_MTU_4096;
		a->dest_qp_num = c->remote_qpn;
		a->rq_psn = c->remote_psn;
		a->max_dest_rd_atomic = c->param.responder_resources ? c->param.responder_resources : 1;
		if (a->max_dest_rd_atomic > SR_MAX_RD_ATOM)
			a->max_dest_rd_atomic = SR_MAX_RD_ATOM;
		/* ib_cm's cm_init_qp_rtr_attr uses 0 (655 ms) for user-space consumers */
		a->min_rnr_timer = 0;
		a->ah_attr.is_global = 1;
		a->ah_attr.port_num = 1;
		a->ah_attr.grh.hop_limit = 64;
		sa_to_gid(&c->id.route.addr.dst_addr, &a->ah_attr.grh.dgid);
		sa_to_gid(&c->id.route.addr.src_addr, &sgid);
		a->ah_attr.grh.sgid_index = (uint8_t)gid_index_of(&sgid);
		*mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		return 0;
	}
	case IBV_QPS_RTS:
		if (c->state < CMS_REQ_SENT || !c->remote_qpn)
			break;
		a->sq_psn = c->local_psn;
		a->timeout = c->ack_timeout;
		a->retry_cnt = c->passive ? c->remote_retry : c->param.retry_count;
		if (a->retry_cnt > 7)
			a->retry_cnt = 7;
		a->rnr_retry = c->passive ? c->param.rnr_retry_count : c->remote_rnr_retry;
		if (a->rnr_retry > 7)
			a->rnr_retry = 7;
		a->max_rd_atomic = c->param.initiator_depth ? c->param.initiator_depth : 1;
		if (a->max_rd_atomic > SR_MAX_RD_ATOM)
			a->max_rd_atomic = SR_MAX_RD_ATOM;
		*mask = IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		return 0;
	default:
		break;
	}
	errno = EINVAL;
	return -1;
}

SR_EXPORT int rdma_init_qp_attr(struct rdma_cm_id *id, struct ibv_qp_attr *qp_attr, int *qp_attr_mask)
{
	struct cm_id *c = to_id(id);
	int ret;

	if (!c || !qp_attr || !qp_attr_mask) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	ret = init_qp_attr(c, qp_attr, qp_attr_mask);
	pthread_mutex_unlock(&cm_lock);
	return ret;
}

static int modify_qp(struct cm_id *c, enum ibv_qp_state s)
{
	struct ibv_qp_attr a = { .qp_state = s };
	int mask, err;

	if (!c->id.qp)
		return 0;
	if (init_qp_attr(c, &a, &mask))
		return -1;
	err = ibv_modify_qp(c->id.qp, &a, mask);
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

SR_EXPORT int rdma_create_qp_ex(struct rdma_cm_id *id, struct ibv_qp_init_attr_ex *attr)
{
	struct cm_id *c = to_id(id);
	struct ibv_qp_init_attr init;
	struct ibv_pd *pd;
	struct ibv_qp *qp;

	if (!c || !attr || !c->id.verbs) {
		errno = EINVAL;
		return -1;
	}
	if (c->id.qp) {
		errno = EINVAL;
		return -1;
	}
	pd = (attr->comp_mask & IBV_QP_INIT_ATTR_PD) ? attr->pd : NULL;
	if (!pd)
		pd = c->id.pd;
	if (!pd) {
		pd = ibv_alloc_pd(c->id.verbs);
		if (!pd)
			return -1;
		c->own_pd = true;
	}
	memset(&init, 0, sizeof(init));
	init.qp_context = attr->qp_context;
	init.send_cq = attr->send_cq;
	init.recv_cq = attr->recv_cq;
	init.srq = attr->srq ? attr->srq : c->id.srq;
	init.cap = attr->cap;
	init.qp_type = attr->qp_type;
	init.sq_sig_all = attr->sq_sig_all;
	/* librdmacm creates the CQs (and completion channels) the caller left out */
	if (!init.send_cq) {
		c->id.send_cq_channel = ibv_create_comp_channel(c->id.verbs);
		c->id.send_cq = c->id.send_cq_channel ?
			ibv_create_cq(c->id.verbs, init.cap.max_send_wr ? (int)init.cap.max_send_wr : 1,
				      &c->id, c->id.send_cq_channel, 0) : NULL;
		init.send_cq = c->id.send_cq;
	}
	if (!init.recv_cq) {
		c->id.recv_cq_channel = ibv_create_comp_channel(c->id.verbs);
		c->id.recv_cq = c->id.recv_cq_channel ?
			ibv_create_cq(c->id.verbs, init.cap.max_recv_wr ? (int)init.cap.max_recv_wr : 1,
				      &c->id, c->id.recv_cq_channel, 0) : NULL;
		init.recv_cq = c->id.recv_cq;
	}
	qp = (init.send_cq && init.recv_cq) ? ibv_create_qp(pd, &init) : NULL;
	if (!qp) {
		int e = errno;

		if (c->id.send_cq)
			ibv_destroy_cq(c->id.send_cq);
		if (c->id.send_cq_channel)
			ibv_destroy_comp_channel(c->id.send_cq_channel);
		if (c->id.recv_cq)
			ibv_destroy_cq(c->id.recv_cq);
		if (c->id.recv_cq_channel)
			ibv_destroy_comp_channel(c->id.recv_cq_channel);
		c->id.send_cq = c->id.recv_cq = NULL;
		c->id.send_cq_channel = c->id.recv_cq_channel = NULL;
		if (c->own_pd) {
			ibv_dealloc_pd(pd);
			c->own_pd = false;
		}
		errno = e;
		return -1;
	}
	attr->cap = init.cap;
	/* published to the CM thread (which reads id.qp under cm_lock) only when complete */
	pthread_mutex_lock(&cm_lock);
	c->id.qp = qp;
	c->id.pd = pd;
	if (modify_qp(c, IBV_QPS_INIT)) {
		c->id.qp = NULL;
		pthread_mutex_unlock(&cm_lock);
		ibv_destroy_qp(qp);
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

SR_EXPORT int rdma_create_qp(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_qp_init_attr *qp_init_attr)
{
	struct ibv_qp_init_attr_ex ex;
	int ret;

	if (!qp_init_attr) {
		errno = EINVAL;
		return -1;
	}
	memset(&ex, 0, sizeof(ex));
	memcpy(&ex, qp_init_attr, sizeof(*qp_init_attr));
	ex.comp_mask = IBV_QP_INIT_ATTR_PD;
	ex.pd = pd;
	ret = rdma_create_qp_ex(id, &ex);
	if (!ret)
		qp_init_attr->cap = ex.cap;
	return ret;
}

SR_EXPORT void rdma_destroy_qp(struct rdma_cm_id *id)
{
	struct cm_id *c = to_id(id);

	struct ibv_qp *qp;

	if (!c)
		return;
	/*
	 * The CM thread moves the QP (RTR/RTS on a REP, ERR when the peer goes
	 * away) under cm_lock: the QP leaves the id under that lock before it
	 * is destroyed, or the CM thread may modify a freed QP.
	 */
	pthread_mutex_lock(&cm_lock);
	qp = c->id.qp;
	c->id.qp = NULL;
	pthread_mutex_unlock(&cm_lock);
	if (!qp)
		return;
	ibv_destroy_qp(qp);
	if (c->id.send_cq)
		ibv_destroy_cq(c->id.send_cq);
	if (c->id.send_cq_channel)
		ibv_destroy_comp_channel(c->id.send_cq_channel);
	if (c->id.recv_cq)
		ibv_destroy_cq(c->id.recv_cq);
	if (c->id.recv_cq_channel)
		ibv_destroy_comp_channel(c->id.recv_cq_channel);
	c->id.send_cq = c->id.recv_cq = NULL;
	c->id.send_cq_channel = c->id.recv_cq_channel = NULL;
	if (c->own_pd) {
		ibv_dealloc_pd(c->id.pd);
		c->id.pd = NULL;
		c->own_pd = false;
	}
}

/* ---- connection establishment -------------------------------------------------- */
static int check_param(struct cm_id *c, struct rdma_conn_param *p, size_t max)
{
	if (p && p->private_data_len > max) {
		errno = EINVAL;
		return -1;
	}
	if (p && p->private_data_len && !p->private_data) {
		errno = EINVAL;
		return -1;
	}
	memset(&c->param, 0, sizeof(c->param));
	if (p) {
		c->param = *p;
		if (p->private_data_len)
			memcpy(c->pdata, p->private_data, p->private_data_len);
		c->param.private_data = c->pdata;
	}
	return 0;
}

static void fill_msg(struct cm_id *c, struct cm_msg *m, uint8_t type)
{
	memset(m, 0, sizeof(*m));
	m->type = type;
	m->pdata_len = c->param.private_data_len;
	memcpy(m->pdata, c->pdata, c->param.private_data_len);
	m->responder_resources = c->param.responder_resources;
	m->initiator_depth = c->param.initiator_depth;
	m->retry_count = c->param.retry_count;
	m->rnr_retry_count = c->param.rnr_retry_count;
	m->srq = c->id.srq || c->param.srq;
	m->qpn = c->local_qpn;
	m->psn = c->local_psn;
}

SR_EXPORT int rdma_connect(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cm_id *c = to_id(id);
	struct epoll_event ev = { .events = EPOLLOUT };

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_ROUTE_RESOLVED || check_param(c, conn_param, PDATA_REQ) ||
	    (!c->id.qp && !(conn_param && conn_param->qp_num))) {
		if (!errno || c->state != CMS_ROUTE_RESOLVED)
			errno = EINVAL;
		pthread_mutex_unlock(&cm_lock);
		return -1;
	}
	c->local_qpn = c->id.qp ? c->id.qp->qp_num : conn_param->qp_num;
	c->local_psn = random_psn();
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	if (connect(c->fd, &c->id.route.addr.dst_addr, sa_len(&c->id.route.addr.dst_addr)) &&
	    errno != EINPROGRESS) {
		int e = errno;

		set_state(c, CMS_ERROR);
		queue_event(c, RDMA_CM_EVENT_UNREACHABLE, -e, NULL, NULL, 0);
		pthread_mutex_unlock(&cm_lock);
		return sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
	}
	set_state(c, CMS_CONNECTING);
	c->deadline_ns = sr_clock_ns() + CONNECT_TIMEOUT_MS * 1000000ull;
	ev.data.u64 = c->serial;
	epoll_ctl(cm_ep, EPOLL_CTL_ADD, c->fd, &ev);
	c->in_epoll = true;
	pthread_mutex_unlock(&cm_lock);
	return sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
}

static uint64_t rep_timeout_ms(void)
{
	const char *v = getenv("SOFTRDMA_CM_REP_TIMEOUT_MS");
	long ms = v ? strtol(v, NULL, 10) : 0;

	return ms > 0 ? (uint64_t)ms : REP_TIMEOUT_MS;
}

SR_EXPORT int rdma_accept(struct rdma_cm_id *id, struct rdma_conn_param *conn_param)
{
	struct cm_id *c = to_id(id);
	struct cm_msg m;

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state == CMS_LISTEN) {
		/* accepting on a listener: nothing to do for a connected-mode id */
		pthread_mutex_unlock(&cm_lock);
		return 0;
	}
	if (c->state != CMS_REQ_RCVD || check_param(c, conn_param, PDATA_REP) ||
	    (!c->id.qp && !(conn_param && conn_param->qp_num))) {
		if (c->state != CMS_REQ_RCVD || !errno)
			errno = EINVAL;
		pthread_mutex_unlock(&cm_lock);
		return -1;
	}
	if (!conn_param) {
		/* librdmacm's defaults when no parameters are given */
		c->param.responder_resources = c->remote_init_depth;
		c->param.initiator_depth = c->remote_resp_res;
		c->param.rnr_retry_count = 7;
	}
	c->local_qpn = c->id.qp ? c->id.qp->qp_num : conn_param->qp_num;
	c->local_psn = random_psn();
	/* as librdmacm's rdma_accept: the QP goes to RTR and RTS before the REP */
	if (modify_qp(c, IBV_QPS_RTR) || modify_qp(c, IBV_QPS_RTS)) {
		int e = errno;

		pthread_mutex_unlock(&cm_lock);
		errno = e;
		return -1;
	}
	fill_msg(c, &m, MSG_REP);
	send_msg(c, &m);
	set_state(c, CMS_REP_SENT);
	c->deadline_ns = sr_clock_ns() + rep_timeout_ms() * 1000000ull;
	pthread_mutex_unlock(&cm_lock);
	return sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
}

SR_EXPORT int rdma_reject(struct rdma_cm_id *id, const void *private_data, uint8_t private_data_len)
{
	struct cm_id *c = to_id(id);
	struct cm_msg m = { .type = MSG_REJ };

	if (!c || private_data_len > PDATA_REJ || (private_data_len && !private_data)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_REQ_RCVD) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	m.pdata_len = private_data_len;
	if (private_data_len)
		memcpy(m.pdata, private_data, private_data_len);
	send_msg(c, &m);
	set_state(c, CMS_REJECTED);
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

SR_EXPORT int rdma_reject_ece(struct rdma_cm_id *id, const void *private_data, uint8_t len)
{
	return rdma_reject(id, private_data, len);
}

SR_EXPORT int rdma_establish(struct rdma_cm_id *id)
{
	struct cm_id *c = to_id(id);
	struct cm_msg m = { .type = MSG_RTU };

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_REP_RCVD) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	send_msg(c, &m);
	set_state(c, CMS_ESTABLISHED);
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

SR_EXPORT int rdma_disconnect(struct rdma_cm_id *id)
{
	struct cm_id *c = to_id(id);
	struct cm_msg m = { .type = MSG_DREQ };

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state == CMS_DISCONNECTED) {
		/* the peer disconnected first (DREQ already answered): only the QP is left */
		qp_to_error(c);
		pthread_mutex_unlock(&cm_lock);
		return 0;
	}
	if (c->state != CMS_ESTABLISHED && c->state != CMS_REP_SENT && c->state != CMS_REP_RCVD) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	/* as the kernel: the QP goes to ERR (flushing) and both sides see DISCONNECTED */
	qp_to_error(c);
	send_msg(c, &m);
	set_state(c, CMS_DISCONNECTED);
	queue_event(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

SR_EXPORT int rdma_get_request(struct rdma_cm_id *listen, struct rdma_cm_id **id)
{
	struct cm_id *l = to_id(listen);
	struct rdma_cm_event *ev;
	struct cm_id *c;

	if (!l || !id || !l->sync) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		if (rdma_get_cm_event(listen->channel, &ev))
			return -1;
		if (ev->event == RDMA_CM_EVENT_CONNECT_REQUEST)
			break;
		rdma_ack_cm_event(ev);
	}
	c = (struct cm_id *)ev->id;
	c->id.event = NULL;
	rdma_ack_cm_event(ev);
	/* the new id gets a private channel of its own, as in librdmacm */
	if (rdma_migrate_id(&c->id, NULL)) {
		rdma_destroy_id(&c->id);
		return -1;
	}
	if (l->ep_has_attr) {
		struct ibv_qp_init_attr a = l->ep_attr;

		if (rdma_create_qp(&c->id, l->ep_pd, &a)) {
			rdma_destroy_id(&c->id);
			return -1;
		}
	}
	*id = &c->id;
	return 0;
}

/* ---- the CM thread ------------------------------------------------------------- */
/* cm_lock held; the connecting side's TCP connect finished */
static void on_connected(struct cm_id *c)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.u64 = c->serial };
	struct cm_msg m;
	int err = 0;
	socklen_t len = sizeof(err);

	getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len);
	if (err) {
		set_state(c, CMS_ERROR);
		id_close_fd(c);
		queue_event(c, RDMA_CM_EVENT_UNREACHABLE, -err, NULL, NULL, 0);
		return;
	}
	/* the source port is known now (resolve_addr may have left it to connect) */
	len = sizeof(c->id.route.addr.src_storage);
	getsockname(c->fd, &c->id.route.addr.src_addr, &len);
	epoll_ctl(cm_ep, EPOLL_CTL_MOD, c->fd, &ev);
	fill_msg(c, &m, MSG_REQ);
	send_msg(c, &m);
	set_state(c, CMS_REQ_SENT);
}

static void accept_one(struct cm_id *l, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN };
	struct cm_id *c;
	int one = 1;
	socklen_t len;

	c = id_new(l->id.channel, l->id.context, l->id.ps, l->id.qp_type);
	if (!c) {
		close(fd);
		return;
	}
	id_link(c);
	c->listen = l;
	c->passive = true;
	c->unclaimed = true;
	c->fd = fd;
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* a connection whose REQ does not arrive in time is dropped (check_timeouts) */
	c->deadline_ns = sr_clock_ns() + CONNECT_TIMEOUT_MS * 1000000ull;
	len = sizeof(c->id.route.addr.src_storage);
	getsockname(fd, &c->id.route.addr.src_addr, &len);
	len = sizeof(c->id.route.addr.dst_storage);
	getpeername(fd, &c->id.route.addr.dst_addr, &len);
	c->id.verbs = cm_ctx;
	c->id.port_num = 1;
	c->ack_timeout = l->ack_timeout;
	set_state(c, CMS_REQ_WAIT);
	ev.data.u64 = c->serial;
	epoll_ctl(cm_ep, EPOLL_CTL_ADD, fd, &ev);
	c->in_epoll = true;
}

/* a burst of connects is taken in one go; the listening socket is non-blocking */
static void on_accept(struct cm_id *l)
{
	for (int i = 0; i < 64; i++) {
		int fd = accept4(l->fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (fd < 0)
			return;
		accept_one(l, fd);
	}
}

/* the CM connection ended or broke */
static void on_lost(struct cm_id *c)
{
	enum cm_state s = c->state;

	id_close_fd(c);
	switch (s) {
	case CMS_REQ_WAIT:
		/* never announced: nobody else knows this id */
		id_unlink(c);
		c->magic = 0;
		softrdma_internal_count(SR_K_CM_ID, -1);
		free(c);
		return;
	case CMS_REQ_SENT:
		set_state(c, CMS_ERROR);
		queue_event(c, RDMA_CM_EVENT_UNREACHABLE, -ECONNRESET, NULL, NULL, 0);
		return;
	case CMS_REQ_RCVD:
	case CMS_REP_SENT:
	case CMS_REP_RCVD:
		set_state(c, CMS_ERROR);
		qp_to_error(c);
		queue_event(c, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNRESET, NULL, NULL, 0);
		return;
	case CMS_ESTABLISHED:
		/*
		 * The peer process is gone without a DREQ. The QP is left to the
		 * verbs layer, which errors it when the peer's wire goes away.
		 */
		set_state(c, CMS_DISCONNECTED);
		queue_event(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
		return;
	default:
		return;
	}
}

static void on_msg(struct cm_id *c, struct cm_msg *m)
{
	cm_dbg("id %p (%s): message %d", (void *)c, cm_state_name[c->state], m->type);
	if (m->pdata_len > PDATA_MAX) {
		on_lost(c);
		return;
	}
	switch (m->type) {
	case MSG_REQ:
		if (c->state != CMS_REQ_WAIT || m->pdata_len > PDATA_REQ)
			break;
		c->remote_qpn = m->qpn;
		c->remote_psn = m->psn & 0xffffff;
		c->remote_resp_res = m->responder_resources;
		c->remote_init_depth = m->initiator_depth;
		c->remote_retry = m->retry_count;
		c->remote_rnr_retry = m->rnr_retry_count;
		if (!c->listen) {
			on_lost(c);
			return;
		}
		set_state(c, CMS_REQ_RCVD);
		/* the request goes where the listener's events go now (it may
		 * have been migrated since the TCP connection was accepted) */
		c->id.channel = c->listen->id.channel;
		queue_event(c, RDMA_CM_EVENT_CONNECT_REQUEST, 0, c->listen, m, PDATA_REQ);
		return;
	case MSG_REP:
		if (c->state != CMS_REQ_SENT || m->pdata_len > PDATA_REP)
			break;
		c->remote_qpn = m->qpn;
		c->remote_psn = m->psn & 0xffffff;
		c->remote_resp_res = m->responder_resources;
		c->remote_init_depth = m->initiator_depth;
		c->remote_rnr_retry = m->rnr_retry_count;
		if (!c->id.qp) {
			/* the consumer drives its QP: it calls rdma_establish */
			set_state(c, CMS_REP_RCVD);
			queue_event(c, RDMA_CM_EVENT_CONNECT_RESPONSE, 0, NULL, m, PDATA_REP);
			return;
		}
		if (modify_qp(c, IBV_QPS_RTR) || modify_qp(c, IBV_QPS_RTS)) {
			struct cm_msg r = { .type = MSG_REJ };

			send_msg(c, &r);
			set_state(c, CMS_ERROR);
			queue_event(c, RDMA_CM_EVENT_CONNECT_ERROR, -EINVAL, NULL, NULL, 0);
			return;
		} else {
			struct cm_msg r = { .type = MSG_RTU };

			send_msg(c, &r);
		}
		set_state(c, CMS_ESTABLISHED);
		queue_event(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, m, PDATA_REP);
		return;
	case MSG_RTU:
		if (c->state != CMS_REP_SENT)
			break;
		set_state(c, CMS_ESTABLISHED);
		queue_event(c, RDMA_CM_EVENT_ESTABLISHED, 0, NULL, NULL, 0);
		return;
	case MSG_REJ:
		if (c->state == CMS_REQ_SENT) {
			set_state(c, CMS_REJECTED);
			id_close_fd(c);
			queue_event(c, RDMA_CM_EVENT_REJECTED, IB_CM_REJ_CONSUMER_DEFINED, NULL, m, PDATA_REJ);
			return;
		}
		if (c->state == CMS_REP_SENT) {
			set_state(c, CMS_ERROR);
			qp_to_error(c);
			queue_event(c, RDMA_CM_EVENT_CONNECT_ERROR, -ECONNREFUSED, NULL, NULL, 0);
			return;
		}
		break;
	case MSG_DREQ:
		if (c->state == CMS_ESTABLISHED || c->state == CMS_REP_SENT || c->state == CMS_REP_RCVD) {
			struct cm_msg r = { .type = MSG_DREP };

			/* as the kernel's CM: a received DREQ leaves the QP alone; the
			 * consumer's own rdma_disconnect moves it to ERR */
			send_msg(c, &r);
			set_state(c, CMS_DISCONNECTED);
			queue_event(c, RDMA_CM_EVENT_DISCONNECTED, 0, NULL, NULL, 0);
			return;
		}
		if (c->state == CMS_DISCONNECTED)
			return; /* both sides disconnected at once */
		break;
	case MSG_DREP:
		if (c->state == CMS_DISCONNECTED)
			return;
		break;
	default:
		break;
	}
	cm_dbg("id %p: unexpected CM message %d in %s", (void *)c, m->type, cm_state_name[c->state]);
}

/* a TCP connect that never completes is an unreachable peer; an accepted
 * connection whose REQ never (fully) arrives is dropped; a REP that no RTU
 * answers times out as in IB CM: the passive side's QP goes to ERR and its id
 * gets UNREACHABLE with -ETIMEDOUT (the kernel's rdma_cm on IB_CM_REP_ERROR) */
static void check_timeouts(uint64_t now)
{
	for (struct cm_id *c = all_ids, *next; c; c = next) {
		next = c->all_next;
		if (c->state == CMS_CONNECTING && now > c->deadline_ns) {
			set_state(c, CMS_ERROR);
			id_close_fd(c);
			queue_event(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, NULL, 0);
		} else if (c->state == CMS_REQ_WAIT && now > c->deadline_ns) {
			cm_dbg("id %p: no REQ within %d ms", (void *)c, CONNECT_TIMEOUT_MS);
			on_lost(c);
		} else if (c->state == CMS_REP_SENT && now > c->deadline_ns) {
			cm_dbg("id %p: no RTU for the REP", (void *)c);
			set_state(c, CMS_ERROR);
			qp_to_error(c);
			id_close_fd(c);
			queue_event(c, RDMA_CM_EVENT_UNREACHABLE, -ETIMEDOUT, NULL, NULL, 0);
		}
	}
}

/* cm_lock held: take what the socket has; each complete message goes to on_msg */
static void on_readable(struct cm_id *c)
{
	uint64_t serial = c->serial;

	for (;;) {
		ssize_t r = recv(c->fd, c->rbuf + c->rlen, sizeof(c->rbuf) - c->rlen, MSG_DONTWAIT);
		struct cm_msg m;

		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0 && errno == EAGAIN)
			return;
		if (r <= 0) {
			on_lost(c);
			return;
		}
		c->rlen += (size_t)r;
		if (c->rlen < sizeof(m))
			continue;
		memcpy(&m, c->rbuf, sizeof(m));
		c->rlen = 0;
		on_msg(c, &m);
		/* the message may have ended the connection or the id */
		if (id_by_serial(serial) != c || c->fd < 0)
			return;
	}
}

#define CM_TICK_MS 100

static void *cm_thread(void *arg)
{
	struct epoll_event evs[64];
	uint64_t next_check = 0;

	(void)arg;
	for (;;) {
		int n = epoll_wait(cm_ep, evs, 64, CM_TICK_MS);
		uint64_t now;

		pthread_mutex_lock(&cm_lock);
		for (int i = 0; i < n; i++) {
			/* by serial number: the id may have been destroyed meanwhile */
			struct cm_id *c = id_by_serial(evs[i].data.u64);

			if (!c || c->fd < 0)
				continue;
			if (c->state == CMS_LISTEN)
				on_accept(c);
			else if (c->state == CMS_CONNECTING)
				on_connected(c);
			else
				on_readable(c);
		}
		now = sr_clock_ns();
		if (now >= next_check) {
			check_timeouts(now);
			next_check = now + CM_TICK_MS * 1000000ull;
		}
		pthread_mutex_unlock(&cm_lock);
	}
	return NULL;
}

/* ---- endpoints (synchronous API) ------------------------------------------------ */
SR_EXPORT int rdma_create_ep(struct rdma_cm_id **id, struct rdma_addrinfo *res, struct ibv_pd *pd,
			     struct ibv_qp_init_attr *qp_init_attr)
{
	struct rdma_cm_id *cid;
	struct cm_id *c;

	if (!id || !res) {
		errno = EINVAL;
		return -1;
	}
	if (rdma_create_id(NULL, &cid, NULL, res->ai_port_space ? res->ai_port_space : RDMA_PS_TCP))
		return -1;
	c = to_id(cid);
	if (res->ai_flags & RAI_PASSIVE) {
		if (res->ai_src_addr && rdma_bind_addr(cid, res->ai_src_addr))
			goto fail;
		if (qp_init_attr) {
			qp_init_attr->qp_type = res->ai_qp_type ? res->ai_qp_type : IBV_QPT_RC;
			c->ep_attr = *qp_init_attr;
			c->ep_has_attr = true;
			c->ep_pd = pd;
		}
		*id = cid;
		return 0;
	}
	if (rdma_resolve_addr(cid, res->ai_src_addr, res->ai_dst_addr, 2000) ||
	    rdma_resolve_route(cid, 2000))
		goto fail;
	if (qp_init_attr) {
		/* as librdmacm: the QP type comes from the address info */
		qp_init_attr->qp_type = res->ai_qp_type ? res->ai_qp_type : IBV_QPT_RC;
		if (rdma_create_qp(cid, pd, qp_init_attr))
			goto fail;
	}
	*id = cid;
	return 0;
fail:
	{
		int e = errno;

		rdma_destroy_id(cid);
		errno = e;
	}
	return -1;
}

SR_EXPORT void rdma_destroy_ep(struct rdma_cm_id *id)
{
	if (!to_id(id))
		return;
	rdma_destroy_qp(id);
	rdma_destroy_id(id);
}

/* ---- rdma_getaddrinfo ---------------------------------------------------------- */
SR_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo ah, *ai;
	struct rdma_addrinfo *r;
	int ret;

	if (!res || (!node && !service)) {
		errno = EINVAL;
		return -1;
	}
	if (cm_start())
		return -1;
	memset(&ah, 0, sizeof(ah));
	ah.ai_socktype = SOCK_STREAM;
	if (hints) {
		if (hints->ai_flags & RAI_PASSIVE)
			ah.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			ah.ai_flags |= AI_NUMERICHOST;
		if (hints->ai_family == AF_INET || hints->ai_family == AF_INET6)
			ah.ai_family = hints->ai_family;
	}
	ret = getaddrinfo(node, service, &ah, &ai);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r) {
		freeaddrinfo(ai);
		errno = ENOMEM;
		return -1;
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	if (r->ai_flags & RAI_PASSIVE) {
		r->ai_src_addr = malloc(ai->ai_addrlen);
		if (r->ai_src_addr)
			memcpy(r->ai_src_addr, ai->ai_addr, ai->ai_addrlen);
		r->ai_src_len = ai->ai_addrlen;
	} else {
		r->ai_dst_addr = malloc(ai->ai_addrlen);
		if (r->ai_dst_addr)
			memcpy(r->ai_dst_addr, ai->ai_addr, ai->ai_addrlen);
		r->ai_dst_len = ai->ai_addrlen;
		if (hints && hints->ai_src_addr && hints->ai_src_len) {
			r->ai_src_addr = malloc(hints->ai_src_len);
			if (r->ai_src_addr)
				memcpy(r->ai_src_addr, hints->ai_src_addr, hints->ai_src_len);
			r->ai_src_len = hints->ai_src_len;
		}
	}
	freeaddrinfo(ai);
	if ((r->ai_flags & RAI_PASSIVE) ? !r->ai_src_addr : !r->ai_dst_addr) {
		rdma_freeaddrinfo(r);
		errno = ENOMEM;
		return -1;
	}
	*res = r;
	return 0;
}

SR_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}

/* ---- not offered: multicast, SRQ helpers, ECE; rsockets' poll/select ---------- */
SR_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	(void)id; (void)addr; (void)context;
	errno = ENOSYS;
	return -1;
}

SR_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				     void *context)
{
	(void)id; (void)mc_join_attr; (void)context;
	errno = ENOSYS;
	return -1;
}

SR_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id; (void)addr;
	errno = ENOSYS;
	return -1;
}

SR_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)event;
	if (!to_id(id)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

SR_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct cm_id *c = to_id(id);
	struct ibv_srq *srq;

	if (!c || !attr || !c->id.verbs) {
		errno = EINVAL;
		return -1;
	}
	if (!pd)
		pd = c->id.pd;
	if (!pd) {
		pd = ibv_alloc_pd(c->id.verbs);
		if (!pd)
			return -1;
		c->own_pd = true;
		c->id.pd = pd;
	}
	srq = ibv_create_srq(pd, attr);
	if (!srq)
		return -1;
	c->id.srq = srq;
	return 0;
}

SR_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr a;

	if (!attr) {
		errno = EINVAL;
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.srq_context = attr->srq_context;
	a.attr = attr->attr;
	return rdma_create_srq(id, (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : NULL, &a);
}

SR_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	struct cm_id *c = to_id(id);

	if (!c || !c->id.srq)
		return;
	ibv_destroy_srq(c->id.srq);
	c->id.srq = NULL;
}

SR_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id; (void)ece;
	errno = EOPNOTSUPP;
	return -1;
}

SR_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id; (void)ece;
	errno = EOPNOTSUPP;
	return -1;
}

/* rsockets entry points: softrdma has no rsockets, but rping and ucmatose
 * import rpoll for plain descriptors, which is poll() */
SR_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

SR_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}

/* the rest of the rsockets API exists so that programs linked against it load;
 * every call fails with ENOSYS (no prototypes: <rdma/rsocket.h> is not used) */
#define RSOCKET_STUB(name) SR_EXPORT int name(void); int name(void) { errno = ENOSYS; return -1; }
RSOCKET_STUB(rsocket)
RSOCKET_STUB(rbind)
RSOCKET_STUB(rlisten)
RSOCKET_STUB(raccept)
RSOCKET_STUB(rconnect)
RSOCKET_STUB(rshutdown)
RSOCKET_STUB(rclose)
RSOCKET_STUB(rrecv)
RSOCKET_STUB(rrecvfrom)
RSOCKET_STUB(rrecvmsg)
RSOCKET_STUB(rsend)
RSOCKET_STUB(rsendto)
RSOCKET_STUB(rsendmsg)
RSOCKET_STUB(rread)
RSOCKET_STUB(rreadv)
RSOCKET_STUB(rwrite)
RSOCKET_STUB(rwritev)
RSOCKET_STUB(rgetpeername)
RSOCKET_STUB(rgetsockname)
RSOCKET_STUB(rsetsockopt)
RSOCKET_STUB(rgetsockopt)
RSOCKET_STUB(rfcntl)
RSOCKET_STUB(riomap)
RSOCKET_STUB(riounmap)
RSOCKET_STUB(riowrite)
