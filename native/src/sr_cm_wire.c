/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdmacm for softrdma0: the CM wire protocol and the CM thread.
 *
 * Addresses are IP addresses, ports RDMA ports (sr_cm_ports.c): a listening
 * id is a TCP listening socket on its address and a TCP port of its own,
 * which its claim in the RDMA port space names. Each connection has its own
 * TCP connection to the listener, which carries the CM exchange
 *     REQ ->  <- REP  RTU ->     (or <- REJ)      DREQ <-> DREP
 * as fixed-size messages that carry both RDMA ports (the REQ's tell the
 * passive side its peer's); its EOF means the peer is gone (DISCONNECTED).
 * A CM thread (epoll) runs the protocol and queues events on the channels.
 * Every CM socket is non-blocking and a message is collected piecewise, so a
 * peer that stalls inside a message holds up only its own connection: no
 * socket call ever waits under cm_lock.
 */
#define _GNU_SOURCE
#include "sr_cm_int.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

/*
 * A connection carries a handful of messages, far below its socket buffer: one
 * that does not go out at once means a peer that stopped reading. The
 * connection is then cut (the CM thread sees it end) rather than waited for.
 */
void send_msg(struct cm_id *c, struct cm_msg *m)
{
	ssize_t n;

	m->magic = CM_MSG_MAGIC;
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

void fill_msg(struct cm_id *c, struct cm_msg *m, uint8_t type)
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
	m->tos = c->tos;
	m->qpn = c->local_qpn;
	m->psn = c->local_psn;
	m->ps = (uint8_t)c->id.ps;
	m->src_port = htons(sa_port(&c->id.route.addr.src_addr));
	m->dst_port = htons(sa_port(&c->id.route.addr.dst_addr));
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
	/* the source address is known now (resolve_addr may have left it to
	 * connect); an id that claimed no RDMA port takes its CM connection's
	 * number, which the kernel made unique for the destination, as the
	 * kernel's rdma_cm gives an ephemeral port unique for it */
	len = sizeof(c->id.route.addr.src_storage);
	getsockname(c->fd, &c->id.route.addr.src_addr, &len);
	if (c->claim_port)
		sa_set_port(&c->id.route.addr.src_addr, c->claim_port);
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
	/* RDMA ports: the listener's, and the peer's once its REQ tells it */
	sa_set_port(&c->id.route.addr.src_addr, sa_port(&l->id.route.addr.src_addr));
	sa_set_port(&c->id.route.addr.dst_addr, 0);
	c->id.verbs = cm_ctx_of(&c->id.route.addr.src_addr);
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
	if (m->magic != CM_MSG_MAGIC || m->pdata_len > PDATA_MAX) {
		on_lost(c);
		return;
	}
	switch (m->type) {
	case MSG_REQ:
		if (c->state != CMS_REQ_WAIT || m->pdata_len > PDATA_REQ)
			break;
		c->remote_qpn = m->qpn;
		c->remote_psn = m->psn & 0xffffff;
		/* the passive side's PSN is fixed when the REQ arrives, as ib_cm's: a consumer that
		 * drives its own QP moves it to RTS (rdma_init_qp_attr) before rdma_accept's REP */
		c->local_psn = (uint32_t)sr_entropy64() & 0xffffff;
		c->remote_resp_res = m->responder_resources;
		c->remote_init_depth = m->initiator_depth;
		c->remote_retry = m->retry_count;
		c->remote_rnr_retry = m->rnr_retry_count;
		/* as ib_cm: the passive side's path, traffic class included, is the REQ's */
		c->tos = m->tos;
		/* a REQ for another port came through a stale claim whose TCP port
		 * is this listener's now: as no listener, the peer sees it end */
		if (!c->listen || m->ps != (uint8_t)c->listen->id.ps || !m->src_port ||
		    ntohs(m->dst_port) != sa_port(&c->listen->id.route.addr.src_addr)) {
			on_lost(c);
			return;
		}
		sa_set_port(&c->id.route.addr.dst_addr, ntohs(m->src_port));
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

void *cm_thread(void *arg)
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
