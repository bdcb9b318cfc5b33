/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Receive: a message's payload is read straight from its connection (socket or
 * ring) into MR memory while the responder or completer handles it (payload
 * sources); each frame is checked and dispatched; a thread that busy-polls a
 * CQ receives for itself (sr_net_poll).
 */
#define _GNU_SOURCE
#include "sr_net_int.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <string.h>
#include <sys/socket.h>

/* ---- payload sources ------------------------------------------------------ */
/* the rest of a message from a socket: POLLIN, or IO_TIMEOUT_MS without any */
static int wait_input(int fd)
{
	uint64_t end = sr_now_ns() + IO_TIMEOUT_MS * 1000000ull;
	struct pollfd p = { .fd = fd, .events = POLLIN };

	for (;;) {
		int n = poll(&p, 1, flush_all_pending() ? 1 : 20);

		if (n == 1)
			return 0;
		if ((n < 0 && errno != EINTR) || sr_now_ns() >= end)
			return -1;
	}
}

/* the rest of a message from the rings (waits, as a socket read would, while the peer writes it) */
static int shm_read(struct sr_conn *c, uint8_t *d, size_t len)
{
	uint32_t unreleased = 0;

	while (len) {
		uint32_t a, n;

		if (c->fd < 0 || !atomic_load_explicit(&c->shm_ready, memory_order_acquire))
			return -1;
		a = sr_shm_rx_avail(&c->shm);
		if (!a) {
			uint64_t end = sr_now_ns() + IO_TIMEOUT_MS * 1000000ull;
			int r;

			sr_shm_rx_release(&c->shm);
			unreleased = 0;
			do {
				/* our queued output may be what the peer needs before it can go on */
				bool q = flush_all_pending();

				r = sr_shm_wait_data(&c->shm, q ? 1 : 20, q ? 1 : 20, &c->peer_gone);
			} while (r && !atomic_load(&c->peer_gone) && sr_now_ns() < end);
			if (r)
				return -1;
			continue;
		}
		n = a < len ? a : (uint32_t)len;
		sr_shm_rx_get(&c->shm, d, n);
		len -= n;
		if (d)
			d += n;
		/* a large payload: let the writer refill behind us */
		unreleased += n;
		if (unreleased >= SR_SHM_RING / 8) {
			sr_shm_rx_release(&c->shm);
			unreleased = 0;
		}
	}
	return 0;
}

/* read exactly len bytes of the current message from the connection */
int conn_read(struct sr_conn *c, void *dst, size_t len)
{
	uint8_t *d = dst;
	size_t avail = c->rend - c->rpos;

	if (c->is_unix)
		return shm_read(c, dst, len);
	if (c->fd < 0)
		return -1;
	if (avail) {
		size_t n = avail < len ? avail : len;

		if (d)
			sr_copy(d, c->rbuf + c->rpos, n);
		c->rpos += n;
		len -= n;
		if (d)
			d += n;
	}
	while (len) {
		ssize_t n;

		if (d) {
			n = recv(c->fd, d, len, 0);
		} else {
			uint8_t scratch[4096];

			n = recv(c->fd, scratch, len < sizeof(scratch) ? len : sizeof(scratch), 0);
		}
		if (n > 0) {
			len -= (size_t)n;
			if (d)
				d += n;
		} else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
			if (errno == EAGAIN && wait_input(c->fd))
				return -1;
		} else {
			return -1;
		}
	}
	return 0;
}

int sr_src_copy(struct sr_src *s, void *dst, size_t len)
{
	uint8_t *d = dst;

	if (len > s->left)
		return -1;
	s->left -= len;
	if (s->conn)
		return conn_read(s->conn, dst, len);
	while (len) {
		const struct iovec *v = &s->iov[s->idx];
		size_t n = v->iov_len - s->off;

		if (n > len)
			n = len;
		sr_copy(d, (const uint8_t *)v->iov_base + s->off, n);
		d += n;
		len -= n;
		s->off += n;
		if (s->off == v->iov_len) {
			s->idx++;
			s->off = 0;
		}
	}
	return 0;
}

int sr_src_skip(struct sr_src *s, uint64_t len)
{
	if (len > s->left)
		return -1;
	s->left -= len;
	if (s->conn)
		return conn_read(s->conn, NULL, len);
	while (len) {
		size_t n = s->iov[s->idx].iov_len - s->off;

		if (n > len)
			n = (size_t)len;
		len -= n;
		s->off += n;
		if (s->off == s->iov[s->idx].iov_len) {
			s->idx++;
			s->off = 0;
		}
	}
	return 0;
}

/* ---- receive dispatch ------------------------------------------------------ */
static bool valid_frame(struct sr_conn *c, const struct sr_hdr *h)
{
	if (h->magic != SR_WIRE_MAGIC || h->op == 0 || h->op >= SR_OP_MAX)
		return false;
	if (!c->hello_done)
		return h->op == SR_OP_HELLO;
	if (h->op == SR_OP_HELLO)
		return false;
	/* a peer may only speak for its own QPs */
	if (h->src_qpn >> SR_QPN_INDEX_BITS != c->remote_inst)
		return false;
	if (payload_len(h) > SR_MAX_MSG_SZ || (h->op == SR_OP_READ && h->len > SR_MAX_MSG_SZ))
		return false;
	return true;
}

static int handle_frame(struct sr_conn *c, struct sr_hdr *h)
{
	struct sr_src s = { .conn = c, .left = payload_len(h) };

	if (!valid_frame(c, h)) {
		conn_kill(c, "malformed message");
		return -1;
	}
	if (h->op == SR_OP_HELLO) {
		struct sr_hdr r = { .magic = SR_WIRE_MAGIC, .op = SR_OP_HELLO, .syndrome = my_inst };

		if (h->dst_qpn != my_inst || h->syndrome == 0 || h->syndrome > SR_MAX_INSTANCES) {
			conn_kill(c, "handshake for another instance");
			return -1;
		}
		c->remote_inst = h->syndrome;
		c->hello_done = true;
		pthread_mutex_lock(&conn_lock);
		if (!conn_by_inst[c->remote_inst] || atomic_load(&conn_by_inst[c->remote_inst]->dead))
			conn_by_inst[c->remote_inst] = c;
		pthread_mutex_unlock(&conn_lock);
		conn_send(c, &r, NULL, 0);
		return 0;
	}
	if (sr_net_port_down(h)) {
		/* a link that is down delivers nothing; the stream itself stays in step */
		if (sr_src_skip(&s, s.left) || s.left || atomic_load(&c->dead)) {
			conn_kill(c, "stream ended inside a message");
			return -1;
		}
		return 0;
	}
	if (sr_debug)
		sr_dbg("rx %s 0x%x -> 0x%x psn %u len %llu", sr_opcode_name(h->op), h->src_qpn,
		       h->dst_qpn, h->psn, (unsigned long long)h->len);
	sr_hwc_add(SR_HWC_RCVD_PKTS, 1);
	pthread_rwlock_rdlock(&sr_mr_lock);
	if (h->op <= SR_OP_FETCH_ADD)
		sr_resp_handle(c, h, &s);
	else
		sr_comp_handle(h, &s);
	pthread_rwlock_unlock(&sr_mr_lock);
	if (s.left || atomic_load(&c->dead)) {
		conn_kill(c, "stream ended inside a message");
		return -1;
	}
	return 0;
}

/* caller holds c->rlock: the messages in the rings, a bounded number per call */
int shm_input(struct sr_conn *c)
{
	int handled = 0;

	if (!atomic_load_explicit(&c->shm_ready, memory_order_acquire))
		return 0;
	while (handled < 64 && !atomic_load(&c->dead) &&
	       sr_shm_rx_avail(&c->shm) >= sizeof(struct sr_hdr)) {
		struct sr_hdr h;

		sr_shm_rx_get(&c->shm, &h, sizeof(h));
		c->big = false;
		if (handle_frame(c, &h))
			return handled;
		handled++;
	}
	if (atomic_load(&c->shm_ready))
		sr_shm_rx_release(&c->shm);
	flush_ack(c);
	return handled;
}

/* caller holds c->rlock; returns the number of messages handled */
int conn_input(struct sr_conn *c)
{
	int handled = 0;

	if (c->is_unix)
		return shm_input(c);

	/* a few rounds per call: a stream of large messages then costs no epoll
	 * wakeup per message, and other connections still get their turn */
	for (int round = 0; round < 16 && c->fd >= 0 && !atomic_load(&c->dead); round++) {
		ssize_t n;

		if (c->rpos == c->rend) {
			c->rpos = c->rend = 0;
		} else if (c->rpos) {
			memmove(c->rbuf, c->rbuf + c->rpos, c->rend - c->rpos);
			c->rend -= c->rpos;
			c->rpos = 0;
		}
		/* after a large message, expect another: read the header alone so
		 * the payload goes from the socket straight into the MR */
		n = recv(c->fd, c->rbuf + c->rend,
			 c->big && c->rend < sizeof(struct sr_hdr) ? sizeof(struct sr_hdr) - c->rend :
			 RBUF_SIZE - c->rend, MSG_DONTWAIT);
		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) {
			conn_kill(c, n == 0 ? "peer closed" : strerror(errno));
			break;
		}
		if (n < 0)
			break;
		c->rend += (size_t)n;
		while (c->rend - c->rpos >= sizeof(struct sr_hdr) && !atomic_load(&c->dead)) {
			struct sr_hdr h;

			memcpy(&h, c->rbuf + c->rpos, sizeof(h));
			c->rpos += sizeof(h);
			c->big = payload_len(&h) >= 16384;
			if (handle_frame(c, &h))
				return handled;
			handled++;
		}
		flush_ack(c);
	}
	return handled;
}

/*
 * Called by poll_cq when the CQ is empty: a thread that busy-polls receives
 * for itself instead of waiting for the progress thread to be scheduled
 * (on a small machine the pollers would starve it).
 */
int sr_net_poll(bool busy)
{
	struct sr_conn *c;
	bool saved = no_block;
	int handled = 0;

	c = atomic_load_explicit(&all_conns, memory_order_acquire);
	if (!c)
		return 0;
	if (busy) {
		uint64_t now = sr_now_ns();

		/* keep the shared line quiet: refresh only when it has aged */
		if (now - atomic_load_explicit(&last_poll_ns, memory_order_relaxed) > POLL_PARK_NS / 8)
			atomic_store_explicit(&last_poll_ns, now, memory_order_relaxed);
	}
	no_block = true;
	for (; c; c = c->all_next) {
		if (atomic_load_explicit(&c->dead, memory_order_relaxed))
			continue;
		/* a ring with no message costs one load, not a system call */
		if (c->is_unix && (!atomic_load_explicit(&c->shm_ready, memory_order_acquire) ||
				   sr_shm_rx_avail(&c->shm) < sizeof(struct sr_hdr)))
			continue;
		if (pthread_mutex_trylock(&c->rlock))
			continue;
		handled += conn_input(c);
		pthread_mutex_unlock(&c->rlock);
	}
	no_block = saved;
	return handled;
}

/*
 * A thread that busy-polls and has found nothing for POLL_YIELD_NS offers its
 * CPU on every further empty poll: on a machine with fewer cores than
 * runnable threads, the peer it waits for (another process's poller or
 * progress thread) may be queued behind it on the same core, and would
 * otherwise get the CPU only when the poller's time slice ends (milliseconds).
 * With a core to spare the yield returns at once.
 */
#define POLL_YIELD_NS 3000ull

static __thread uint64_t poll_idle_since;

void sr_net_poll_empty(void)
{
	uint64_t now = sr_now_ns();

	if (!poll_idle_since)
		poll_idle_since = now;
	else if (now - poll_idle_since > POLL_YIELD_NS)
		sched_yield();
}

void sr_net_poll_found(void)
{
	if (poll_idle_since)
		poll_idle_since = 0;
}
