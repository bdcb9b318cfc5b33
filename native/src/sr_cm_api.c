/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdmacm for softrdma0: the API (event channels and events, ids, QPs,
 * connection establishment, endpoints). The CM exchange itself is in
 * sr_cm_wire.c, addresses in sr_cm_addr.c.
 *
 * An event channel is an eventfd in semaphore mode, one count per queued
 * event (a thread blocked on a destroyed channel stays blocked, as with the
 * kernel's rdma_cm file).
 */
#define _GNU_SOURCE
#include "sr_cm_int.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>

pthread_mutex_t cm_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cm_acked = PTHREAD_COND_INITIALIZER; /* an event was acknowledged */
static pthread_once_t cm_once = PTHREAD_ONCE_INIT;
int cm_ep = -1;
struct ibv_context *cm_ctxs[SR_MAX_DEVICES];
int cm_ndev;
static int cm_err;
struct cm_id *all_ids;       /* cm_lock */
#define ID_HASH 4096                /* ids by serial: the CM thread finds an event's id in O(1) */
static struct cm_id *id_hash[ID_HASH];

const char *const cm_state_name[CMS_NUM] = {
	"IDLE", "BOUND", "ADDR_QUERY", "ADDR_RESOLVED", "ROUTE_RESOLVED", "LISTEN", "CONNECTING",
	"REQ_SENT", "REQ_WAIT", "REQ_RCVD", "REP_RCVD", "REP_SENT", "ESTABLISHED", "DISCONNECTED",
	"REJECTED", "ERROR",
};

static uint32_t random_psn(void)
{
	return (uint32_t)sr_entropy64() & 0xffffff;
}

void id_link(struct cm_id *c)
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

struct cm_id *id_by_serial(uint64_t serial)
{
	for (struct cm_id *c = id_hash[serial % ID_HASH]; c; c = c->hash_next)
		if (c->serial == serial)
			return c;
	return NULL;
}

void id_unlink(struct cm_id *c)
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

int cm_debug;

static void cm_init(void)
{
	pthread_t th;
	pthread_attr_t at;

	cm_debug = sr_debug_env();
	cm_ndev = softrdma_internal_device_count();
	for (int d = 0; d < cm_ndev; d++)
		if (!(cm_ctxs[d] = softrdma_internal_open(d)))
			cm_ndev = 0;
	cm_ep = epoll_create1(EPOLL_CLOEXEC);
	if (!cm_ndev || cm_ep < 0) {
		cm_err = errno ? errno : ENODEV;
		return;
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, cm_thread, NULL))
		cm_err = errno ? errno : EAGAIN;
	pthread_attr_destroy(&at);
}

int cm_start(void)
{
	pthread_once(&cm_once, cm_init);
	if (cm_err) {
		errno = cm_err;
		return -1;
	}
	return 0;
}

void set_state(struct cm_id *c, enum cm_state s)
{
	if (c->state != s)
		cm_dbg("id %p: %s -> %s", (void *)c, cm_state_name[c->state], cm_state_name[s]);
	c->state = s;
}

/* ---- events ----------------------------------------------------------------- */
/* cm_lock held */
void queue_event(struct cm_id *c, enum rdma_cm_event_type type, int status,
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
int sync_wait(struct cm_id *c, enum rdma_cm_event_type want)
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
struct cm_id *id_new(struct rdma_event_channel *channel, void *context,
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

void id_close_fd(struct cm_id *c)
{
	if (c->fd >= 0) {
		if (c->in_epoll)
			epoll_ctl(cm_ep, EPOLL_CTL_DEL, c->fd, NULL);
		close(c->fd);
	}
	c->fd = -1;
	c->in_epoll = false;
}

void qp_to_error(struct cm_id *c)
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
	port_release(c);
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
			if (optlen != 1)
				break;
			c->tos = *(uint8_t *)optval;
			return 0;
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
		/* RoCE: the TOS is the GRH traffic class (the IP header's DSCP/ECN byte); the SL is
		 * the netdev's priority for it, 0 without a VLAN (the kernel's iboe_tos_to_sl) */
		a->ah_attr.grh.traffic_class = c->tos;
		sa_to_gid(&c->id.route.addr.dst_addr, &a->ah_attr.grh.dgid);
		sa_to_gid(&c->id.route.addr.src_addr, &sgid);
		a->ah_attr.grh.sgid_index = (uint8_t)gid_index_of(c->id.verbs, &sgid);
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
		/* the REQ's RNR retry count is what the passive side retries, the REP's what the
		 * active side retries: each QP gets its peer's (as ib_cm; seen on kernel rxe) */
		a->rnr_retry = c->remote_rnr_retry;
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

int modify_qp(struct cm_id *c, enum ibv_qp_state s)
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
	/* the port went down after the route was resolved: the REQ cannot leave */
	if (softrdma_internal_port_down(c->id.verbs)) {
		set_state(c, CMS_ERROR);
		queue_event(c, RDMA_CM_EVENT_UNREACHABLE, -ENETUNREACH, NULL, NULL, 0);
		pthread_mutex_unlock(&cm_lock);
		return sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
	}
	if (connect_listener(c) && errno != EINPROGRESS) {
		int e = errno;

		set_state(c, CMS_ERROR);
		queue_event(c, RDMA_CM_EVENT_UNREACHABLE, -e, NULL, NULL, 0);
		pthread_mutex_unlock(&cm_lock);
		return sync_wait(c, RDMA_CM_EVENT_ESTABLISHED);
	}
	set_state(c, CMS_CONNECTING);
	c->deadline_ns = sr_clock_ns() + CONNECT_TIMEOUT_MS * 1000000ull;
	/* without a socket nothing answers: the deadline ends it (connect_listener) */
	if (c->fd >= 0) {
		ev.data.u64 = c->serial;
		epoll_ctl(cm_ep, EPOLL_CTL_ADD, c->fd, &ev);
		c->in_epoll = true;
	}
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
	/* local_psn: chosen when the REQ arrived */
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
