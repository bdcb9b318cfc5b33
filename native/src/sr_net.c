/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wire: connections between instances and what goes out on them.
 *  - Each instance listens on an ephemeral TCP port on the wildcard address
 *    (IPv6 dual-stack, else IPv4), which its registry entry names
 *    (sr_registry.c); a peer connects to the GID's IP address on it;
 *  - one TCP connection per pair of instances carries all their QPs' messages
 *    (struct sr_hdr + payload), TCP_NODELAY; peers inside one process call the
 *    responder and completer directly (same code, no copy to a socket);
 *  - two instances of one host and namespace use shared-memory rings instead
 *    (sr_shm.c), handed over on an abstract Unix socket.
 * Requests are written by the posting thread itself; what cannot go out at
 * once is queued. ACKs are coalesced. Input is read by sr_recv.c, in the
 * progress thread (sr_progress.c) or in a busy-polling thread.
 */
#define _GNU_SOURCE
#include "sr_net_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

int listen_fd = -1, ep_fd = -1, unix_fd = -1;
pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
struct sr_conn *conn_by_inst[SR_MAX_INSTANCES + 1];
/* live connections, walked without a lock by polling threads; dead ones are
 * unlinked but never freed (QPs and walkers may still point to them) */
struct sr_conn *_Atomic all_conns;
static struct sr_conn *dead_conns;

/* set in the progress thread and while a polling thread runs the input path:
 * such threads never block on a full socket */
__thread bool no_block;

static int wait_fd(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int n;

	do
		n = poll(&p, 1, IO_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

/*
 * A reader inside a message waits for its rest, possibly holding the QP's
 * lock (the completer copies a READ response out). Meanwhile the output this
 * process queued for any connection goes out: the peer may need it before it
 * can send the rest, e.g. when two connections join the same two instances
 * (both connected at once) and each side's reader waits on a different one
 * while the other side's threads wait for the QP lock. Returns whether some
 * output is still queued (the caller then waits in short slices).
 */
bool flush_all_pending(void)
{
	bool left = false;

	for (struct sr_conn *c = atomic_load(&all_conns); c; c = c->all_next) {
		if (atomic_load_explicit(&c->dead, memory_order_relaxed) || queue_empty(c))
			continue;
		if (!pthread_mutex_trylock(&c->wlock))
			writer_release(c, false);
		left |= !queue_empty(c);
	}
	return left;
}

/* a connection can no longer be used; threads waiting on its rings give up */
static void mark_dead(struct sr_conn *c)
{
	atomic_store(&c->dead, true);
	if (c->is_unix) {
		atomic_store(&c->peer_gone, true);
		if (atomic_load(&c->shm_ready))
			sr_shm_wake_local(&c->shm);
	}
}

/* ---- connection output ------------------------------------------------------ */
void arm_out(struct sr_conn *c, bool on)
{
	struct epoll_event ev = { .events = (c->parked ? 0 : EPOLLIN) | (on ? EPOLLOUT : 0),
				  .data.ptr = c };

	if (c->is_unix) {
		uint64_t one = 1;

		/* woken when the peer frees space; if there is some already, wake ourselves */
		if (on && c->fd >= 0 && sr_shm_arm_tx(&c->shm) &&
		    write(c->shm.my_efd, &one, sizeof(one)) < 0)
			sr_dbg("wakeup lost");
		return;
	}
	if (c->out_armed == on || c->fd < 0)
		return;
	c->out_armed = on;
	epoll_ctl(ep_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

static void enqueue(struct sr_conn *c, const struct iovec *iov, int cnt, size_t skip)
{
	size_t total = 0;
	struct sr_pending *p;
	uint8_t *d;

	for (int i = 0; i < cnt; i++)
		total += iov[i].iov_len;
	total -= skip;
	p = malloc(sizeof(*p) + total);
	if (!p) {
		/* the progress thread sees the hang-up and errors the QPs */
		mark_dead(c);
		shutdown(c->fd, SHUT_RDWR);
		return;
	}
	p->next = NULL;
	p->len = total;
	p->off = 0;
	d = p->data;
	for (int i = 0; i < cnt; i++) {
		size_t l = iov[i].iov_len;
		const uint8_t *s = iov[i].iov_base;

		if (skip >= l) {
			skip -= l;
			continue;
		}
		sr_copy(d, s + skip, l - skip);
		d += l - skip;
		skip = 0;
	}
	pthread_mutex_lock(&c->qlock);
	if (c->qtail)
		c->qtail->next = p;
	else
		__atomic_store_n(&c->qhead, p, __ATOMIC_RELEASE);
	c->qtail = p;
	pthread_mutex_unlock(&c->qlock);
}

#define SHM_CHUNK (64 * 1024) /* a large message is published piecewise: the reader copies along */

/* wlock held: as send_iov, into the ring */
static ssize_t shm_send_iov(struct sr_conn *c, struct iovec *iov, int cnt, bool blocking)
{
	size_t done = 0, left = 0, unpub = 0;

	if (c->fd < 0 || !atomic_load(&c->shm_ready))
		return -1;
	for (int i = 0; i < cnt; i++)
		left += iov[i].iov_len;
	while (cnt) {
		uint32_t space;
		size_t n;

		if (!iov->iov_len) {
			iov++;
			cnt--;
			continue;
		}
		space = sr_shm_tx_space(&c->shm);
		if (!space) {
			if (unpub) {
				sr_shm_tx_publish(&c->shm);
				unpub = 0;
			}
			if (!blocking)
				break;
			if (sr_shm_wait_space(&c->shm, left < SR_SHM_RING / 4 ? (uint32_t)left : SR_SHM_RING / 4,
					      IO_TIMEOUT_MS, &c->peer_gone)) {
				/* the stream is cut inside a message: both sides' progress threads see
				 * the socket end and error the QPs */
				shutdown(c->fd, SHUT_RDWR);
				return -1;
			}
			continue;
		}
		n = iov->iov_len < space ? iov->iov_len : space;
		if (n > SHM_CHUNK)
			n = SHM_CHUNK;
		sr_shm_tx_put(&c->shm, iov->iov_base, n);
		done += n;
		left -= n;
		unpub += n;
		iov->iov_base = (uint8_t *)iov->iov_base + n;
		iov->iov_len -= n;
		if (unpub >= SHM_CHUNK) {
			sr_shm_tx_publish(&c->shm);
			unpub = 0;
		}
	}
	if (unpub)
		sr_shm_tx_publish(&c->shm);
	return (ssize_t)done;
}

/* wlock held; returns bytes written, -1 on a dead connection */
static ssize_t send_iov(struct sr_conn *c, struct iovec *iov, int cnt, bool blocking)
{
	size_t done = 0;

	if (c->is_unix)
		return shm_send_iov(c, iov, cnt, blocking);

	while (cnt) {
		struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)cnt };
		ssize_t n = c->fd < 0 ? -1 : sendmsg(c->fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN) {
				if (!blocking)
					return (ssize_t)done;
				if (wait_fd(c->fd, POLLOUT))
					return -1;
				continue;
			}
			return -1;
		}
		done += (size_t)n;
		while (cnt && (size_t)n >= iov->iov_len) {
			n -= (ssize_t)iov->iov_len;
			iov->iov_len = 0; /* the caller finds what is left by skipping empty entries */
			iov++;
			cnt--;
		}
		if (cnt) {
			iov->iov_base = (uint8_t *)iov->iov_base + n;
			iov->iov_len -= (size_t)n;
		}
	}
	return (ssize_t)done;
}

/* wlock held: write queued frames; false if some remain (would block) */
static bool flush_pending(struct sr_conn *c, bool blocking)
{
	for (;;) {
		struct sr_pending *p;
		struct iovec v;
		ssize_t n;

		/* only the writer (wlock) takes frames off the queue: a look without qlock
		 * is enough to see whether there is one */
		p = __atomic_load_n(&c->qhead, __ATOMIC_ACQUIRE);
		if (!p)
			return true;
		v.iov_base = p->data + p->off;
		v.iov_len = p->len - p->off;
		n = send_iov(c, &v, 1, blocking);
		if (n < 0) {
			mark_dead(c);
			return true;
		}
		p->off += (size_t)n;
		if (p->off < p->len)
			return false;
		pthread_mutex_lock(&c->qlock);
		__atomic_store_n(&c->qhead, p->next, __ATOMIC_RELEASE);
		if (!p->next)
			c->qtail = NULL;
		pthread_mutex_unlock(&c->qlock);
		free(p);
	}
}

/* without qlock (a frame queued by another thread is seen after its enqueue, whose
 * trylock of wlock is a full barrier, and the caller's fence) */
bool queue_empty(struct sr_conn *c)
{
	return __atomic_load_n(&c->qhead, __ATOMIC_ACQUIRE) == NULL;
}

/* give up the writer role without stranding frames queued meanwhile */
void writer_release(struct sr_conn *c, bool blocking)
{
	for (;;) {
		bool all = flush_pending(c, blocking);

		if (!all)
			arm_out(c, true);
		pthread_mutex_unlock(&c->wlock);
		/* Dekker with enqueue-then-trylock: a frame queued while we held wlock is seen */
		atomic_thread_fence(memory_order_seq_cst);
		if (!all || queue_empty(c) || pthread_mutex_trylock(&c->wlock))
			return;
	}
}

/*
 * Send one frame. Application threads may block (poll for POLLOUT); the
 * progress thread never does: what cannot go out now is queued and sent on
 * EPOLLOUT, so two processes can never wait on each other's full buffers.
 */
/* send messages already laid out as iovecs (headers included); v is consumed */
static int conn_sendv(struct sr_conn *c, struct iovec *v, int cnt)
{
	bool blocking = !no_block;
	size_t total = 0;
	ssize_t n;

	if (atomic_load(&c->dead))
		return -1;
	for (int i = 0; i < cnt; i++)
		total += v[i].iov_len;
	if (blocking) {
		pthread_mutex_lock(&c->wlock);
	} else if (pthread_mutex_trylock(&c->wlock)) {
		enqueue(c, v, cnt, 0);
		if (!pthread_mutex_trylock(&c->wlock))
			writer_release(c, false);
		return 0;
	}
	if (!flush_pending(c, blocking)) {
		enqueue(c, v, cnt, 0);
		writer_release(c, blocking);
		return 0;
	}
	n = send_iov(c, v, cnt, blocking);
	if (n < 0) {
		mark_dead(c);
		pthread_mutex_unlock(&c->wlock);
		return -1;
	}
	if ((size_t)n < total) {
		/* send_iov emptied what went out; the rest starts at the first non-empty entry */
		int i = 0;

		while (i < cnt && v[i].iov_len == 0)
			i++;
		enqueue(c, v + i, cnt - i, 0);
	}
	writer_release(c, blocking);
	return 0;
}

int conn_send(struct sr_conn *c, struct sr_hdr *h, const struct iovec *iov, int cnt)
{
	struct iovec v[SR_MAX_SGE + 1];

	v[0].iov_base = h;
	v[0].iov_len = sizeof(*h);
	for (int i = 0; i < cnt; i++)
		v[i + 1] = iov[i];
	return conn_sendv(c, v, cnt + 1);
}

/* ---- connections ---------------------------------------------------------------- */
struct sr_conn *conn_new(int fd)
{
	struct sr_conn *c = calloc(1, sizeof(*c));
	int one = 1;

	if (!c)
		return NULL;
	c->rbuf = malloc(RBUF_SIZE);
	if (!c->rbuf) {
		free(c);
		return NULL;
	}
	c->fd = fd;
	c->shm.my_efd = c->shm.peer_efd = -1;
	pthread_mutex_init(&c->rlock, NULL);
	pthread_mutex_init(&c->wlock, NULL);
	pthread_mutex_init(&c->qlock, NULL);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	pthread_mutex_lock(&conn_lock);
	c->all_next = atomic_load(&all_conns);
	atomic_store(&all_conns, c);
	pthread_mutex_unlock(&conn_lock);
	return c;
}

struct lost_arg {
	uint32_t inst;
};

static void qp_lost(struct sr_qp *qp, void *arg)
{
	struct lost_arg *a = arg;

	if (qp->remote_inst == a->inst && a->inst != my_inst)
		sr_comp_peer_lost(qp);
}

/* caller holds c->rlock (or c is not published yet) */
void conn_kill(struct sr_conn *c, const char *why)
{
	struct lost_arg a;
	struct sr_pending *p;

	mark_dead(c);
	pthread_mutex_lock(&conn_lock);
	if (c->killed) {
		pthread_mutex_unlock(&conn_lock);
		return;
	}
	c->killed = true;
	if (c->hello_done && conn_by_inst[c->remote_inst] == c)
		conn_by_inst[c->remote_inst] = NULL;
	for (struct sr_conn *_Atomic *pp = &all_conns; *pp; pp = &(*pp)->all_next) {
		if (*pp == c) {
			atomic_store(pp, c->all_next);
			break;
		}
	}
	c->dead_next = dead_conns;
	dead_conns = c;
	if (c->parked) {
		c->parked = false;
		atomic_fetch_sub(&tcp_parked, 1);
	}
	pthread_mutex_unlock(&conn_lock);
	sr_dbg("connection to instance %u closed: %s", c->remote_inst, why);
	if (c->fd >= 0) {
		shutdown(c->fd, SHUT_RDWR);
		epoll_ctl(ep_fd, EPOLL_CTL_DEL, c->fd, NULL);
	}
	pthread_mutex_lock(&c->wlock);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	if (c->is_unix) {
		/* both roles are ours: nobody is inside the rings */
		if (c->shm.my_efd >= 0)
			epoll_ctl(ep_fd, EPOLL_CTL_DEL, c->shm.my_efd, NULL);
		atomic_store(&c->shm_ready, false);
		sr_shm_detach(&c->shm);
	}
	/* the caller holds rlock: nobody reads the buffer any more */
	free(c->rbuf);
	c->rbuf = NULL;
	c->rpos = c->rend = 0;
	c->has_ack = false;
	pthread_mutex_lock(&c->qlock);
	while ((p = c->qhead)) {
		__atomic_store_n(&c->qhead, p->next, __ATOMIC_RELEASE);
		free(p);
	}
	c->qtail = NULL;
	pthread_mutex_unlock(&c->qlock);
	pthread_mutex_unlock(&c->wlock);
	if (c->hello_done) {
		a.inst = c->remote_inst;
		sr_qp_foreach(qp_lost, &a);
	}
}

static int connect_to(const union ibv_gid *gid, int port)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int fd, err = 0;
	socklen_t elen = sizeof(err);
	static const uint8_t v4prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	memset(&ss, 0, sizeof(ss));
	if (!memcmp(gid->raw, v4prefix, 12)) {
		struct sockaddr_in *s = (struct sockaddr_in *)&ss;

		s->sin_family = AF_INET;
		s->sin_port = htons((uint16_t)port);
		memcpy(&s->sin_addr, &gid->raw[12], 4);
		len = sizeof(*s);
	} else {
		struct sockaddr_in6 *s = (struct sockaddr_in6 *)&ss;

		s->sin6_family = AF_INET6;
		s->sin6_port = htons((uint16_t)port);
		memcpy(&s->sin6_addr, gid->raw, 16);
		len = sizeof(*s);
	}
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -1;
	if (connect(fd, (struct sockaddr *)&ss, len) && errno != EINPROGRESS) {
		close(fd);
		return -1;
	}
	{
		struct pollfd p = { .fd = fd, .events = POLLOUT };

		if (poll(&p, 1, CONNECT_TIMEOUT_MS) != 1 ||
		    getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) || err) {
			close(fd);
			return -1;
		}
	}
	return fd;
}

/* ---- same-host connections ---------------------------------------------------------- */
/*
 * Each instance listens on an abstract Unix socket named after the registry
 * directory (device and inode) and its id. Abstract names belong to a network
 * namespace, so only instances of one host and one namespace meet there;
 * the others, and any failure of the hand-over, use TCP.
 */
static socklen_t shm_addr(struct sockaddr_un *a, uint32_t inst)
{
	int n;

	memset(a, 0, sizeof(*a));
	a->sun_family = AF_UNIX;
	n = snprintf(a->sun_path + 1, sizeof(a->sun_path) - 1, "softrdma/%llx:%llx/%u",
		     (unsigned long long)rundir_dev, (unsigned long long)rundir_ino, inst);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

/* the process at the other end is the one that holds the instance's registry entry */
static bool peer_is(int fd, int pid)
{
	struct ucred cr;
	socklen_t len = sizeof(cr);

	return !getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len) && cr.pid == pid &&
	       cr.uid == getuid();
}

/* the peer's eventfd and doorbells (fds[0], fds[1..n)), owned by s from here on */
static void shm_take_peer_fds(struct sr_shm *s, const int *fds, int n)
{
	s->peer_efd = n > 0 ? fds[0] : -1;
	s->n_peer_db = 0;
	for (int i = 1; i < n && i <= SR_DB_SLOTS; i++)
		s->peer_db[s->n_peer_db++] = fds[i];
}

/* rlock held (or c not reachable yet): the rings are in place */
static void shm_publish(struct sr_conn *c, uint32_t inst)
{
	struct epoll_event ev = { .events = EPOLLIN };

	c->remote_inst = inst;
	c->hello_done = true;
	atomic_store_explicit(&c->shm_ready, true, memory_order_release);
	pthread_mutex_lock(&conn_lock);
	if (!conn_by_inst[inst] || atomic_load(&conn_by_inst[inst]->dead))
		conn_by_inst[inst] = c;
	pthread_mutex_unlock(&conn_lock);
	ev.data.u64 = (uint64_t)(uintptr_t)c | 1; /* the ring's wakeups */
	epoll_ctl(ep_fd, EPOLL_CTL_ADD, c->shm.my_efd, &ev);
}

static struct sr_conn *shm_connect(uint32_t inst, int pid)
{
	struct sockaddr_un a;
	socklen_t alen = shm_addr(&a, inst);
	struct sr_hdr h = { .magic = SR_WIRE_MAGIC, .op = SR_OP_HELLO, .syndrome = my_inst,
			    .dst_qpn = inst };
	struct sr_hdr r;
	struct sr_shm s = { .my_efd = -1, .peer_efd = -1 };
	struct pollfd pfd = { .events = POLLIN };
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct sr_conn *c;
	int fd, memfd = -1, fds[SR_SHM_MAX_FDS], rfds[1 + SR_DB_SLOTS], nfds = 1 + SR_DB_SLOTS;

	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	if (connect(fd, (struct sockaddr *)&a, alen) || !peer_is(fd, pid))
		goto fail;
	if (sr_shm_create(&s, &memfd))
		goto fail;
	s.my_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	fds[0] = memfd;
	fds[1] = s.my_efd;
	if (s.my_efd < 0 || sr_doorbell_fds(fds + 2) ||
	    sr_shm_send_fds(fd, &h, sizeof(h), fds, SR_SHM_MAX_FDS))
		goto fail;
	pfd.fd = fd;
	if (poll(&pfd, 1, CONNECT_TIMEOUT_MS) != 1 ||
	    sr_shm_recv_fds(fd, &r, sizeof(r), rfds, &nfds) < 0)
		goto fail;
	shm_take_peer_fds(&s, rfds, nfds);
	if (nfds != 1 + SR_DB_SLOTS || r.magic != SR_WIRE_MAGIC || r.op != SR_OP_HELLO ||
	    r.syndrome != inst)
		goto fail;
	close(memfd);
	memfd = -1;
	c = conn_new(fd);
	if (!c)
		goto fail;
	c->is_unix = true;
	pthread_mutex_lock(&c->rlock);
	c->shm = s;
	shm_publish(c, inst);
	pthread_mutex_unlock(&c->rlock);
	ev.data.ptr = c;
	epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd, &ev);
	sr_dbg("connected to instance %u (shared memory)", inst);
	return c;
fail:
	sr_dbg("instance %u: no shared-memory wire (%s), using TCP", inst, strerror(errno));
	if (memfd >= 0)
		close(memfd);
	sr_shm_detach(&s);
	if (s.map)
		munmap(s.map, s.map_len);
	close(fd);
	return NULL;
}

/* progress thread, rlock held: the connecting instance hands its rings over */
void shm_accept_hello(struct sr_conn *c)
{
	struct sr_hdr h, r = { .magic = SR_WIRE_MAGIC, .op = SR_OP_HELLO, .syndrome = my_inst };
	int fds[SR_SHM_MAX_FDS], nfds = SR_SHM_MAX_FDS, pid = 0, mine[1 + SR_DB_SLOTS];
	ssize_t n = sr_shm_recv_fds(c->fd, &h, sizeof(h), fds, &nfds);
	const char *why = "bad handshake";

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n != sizeof(h) || nfds != SR_SHM_MAX_FDS || h.magic != SR_WIRE_MAGIC || h.op != SR_OP_HELLO ||
	    h.dst_qpn != my_inst || h.syndrome == 0 || h.syndrome > SR_MAX_INSTANCES)
		goto fail;
	why = "handshake from a process that does not hold the instance's registry entry";
	if (registry_port(h.syndrome, &pid) < 0 || !peer_is(c->fd, pid))
		goto fail;
	why = "cannot map the peer's rings";
	if (sr_shm_attach(&c->shm, fds[0]))
		goto fail;
	close(fds[0]);
	fds[0] = -1;
	shm_take_peer_fds(&c->shm, fds + 1, nfds - 1);
	nfds = 0;
	c->shm.my_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	mine[0] = c->shm.my_efd;
	if (c->shm.my_efd < 0 || sr_doorbell_fds(mine + 1) ||
	    sr_shm_send_fds(c->fd, &r, sizeof(r), mine, 1 + SR_DB_SLOTS))
		goto fail;
	shm_publish(c, h.syndrome);
	sr_dbg("instance %u connected (shared memory)", h.syndrome);
	return;
fail:
	for (int i = 0; i < nfds; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	conn_kill(c, why);
}

/* the same-host wire's listener; without it (any failure) peers reach us by TCP */
void unix_listen(void)
{
	struct sockaddr_un a;
	socklen_t len = shm_addr(&a, my_inst);
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

	if (fd < 0)
		return;
	if (bind(fd, (struct sockaddr *)&a, len) || listen(fd, 128)) {
		sr_dbg("no shared-memory wire: %s", strerror(errno));
		close(fd);
		return;
	}
	unix_fd = fd;
}

/* ---- the QPs' side: connect, send, reply (ACK coalescing) ------------------------ */
/* find or open the connection to an instance; the GID names its address */
static struct sr_conn *conn_get(uint32_t inst, const union ibv_gid *gid)
{
	struct sr_conn *c;
	struct sr_hdr h = { .magic = SR_WIRE_MAGIC, .op = SR_OP_HELLO };
	struct sr_hdr r;
	struct epoll_event ev;
	struct pollfd pfd = { .events = POLLIN };
	int port, fd, pid;

	if (inst == 0 || inst > SR_MAX_INSTANCES)
		return NULL;
	pthread_mutex_lock(&conn_lock);
	c = conn_by_inst[inst];
	pthread_mutex_unlock(&conn_lock);
	if (c && !atomic_load(&c->dead))
		return c;
	port = registry_port(inst, &pid);
	if (port < 0) {
		sr_dbg("instance %u is not registered in %s", inst, rundir);
		return NULL;
	}
	/* an address of this host and namespace: the peer may be reachable through shared memory */
	if (unix_fd >= 0 && sr_gid_is_local(gid)) {
		c = shm_connect(inst, pid);
		if (c)
			return c;
	}
	fd = connect_to(gid, port);
	if (fd < 0) {
		sr_dbg("connect to instance %u port %d: %s", inst, port, strerror(errno));
		return NULL;
	}
	/* HELLO both ways proves we reached the instance the registry named */
	h.syndrome = my_inst;
	h.dst_qpn = inst;
	if (send(fd, &h, sizeof(h), MSG_NOSIGNAL) != sizeof(h)) {
		close(fd);
		return NULL;
	}
	c = conn_new(fd);
	if (!c) {
		close(fd);
		return NULL;
	}
	pthread_mutex_lock(&c->rlock);
	/* a port reused by some other program must not hold us for long */
	pfd.fd = fd;
	if (poll(&pfd, 1, CONNECT_TIMEOUT_MS) != 1 ||
	    conn_read(c, &r, sizeof(r)) || r.magic != SR_WIRE_MAGIC || r.op != SR_OP_HELLO ||
	    r.syndrome != inst) {
		sr_dbg("instance %u: handshake failed", inst);
		conn_kill(c, "bad handshake");
		pthread_mutex_unlock(&c->rlock);
		return NULL;
	}
	c->remote_inst = inst;
	c->hello_done = true;
	pthread_mutex_unlock(&c->rlock);
	pthread_mutex_lock(&conn_lock);
	if (!conn_by_inst[inst] || atomic_load(&conn_by_inst[inst]->dead))
		conn_by_inst[inst] = c;
	pthread_mutex_unlock(&conn_lock);
	ev.events = EPOLLIN;
	ev.data.ptr = c;
	epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd, &ev);
	sr_dbg("connected to instance %u (port %d)", inst, port);
	return c;
}

/*
 * RTR: the QP takes the connection to its peer's instance if there is one; a
 * new connection is opened by the first send (in the posting thread), never
 * here: modify_qp runs under rdma_cm's lock, where no handshake may wait.
 */
void sr_net_qp_connect(struct sr_qp *qp)
{
	pthread_mutex_lock(&qp->send_lock);
	qp->remote_inst = qp->attr.dest_qp_num >> SR_QPN_INDEX_BITS;
	qp->conn = NULL;
	if (qp->remote_inst != my_inst && qp->remote_inst <= SR_MAX_INSTANCES) {
		pthread_mutex_lock(&conn_lock);
		qp->conn = conn_by_inst[qp->remote_inst];
		pthread_mutex_unlock(&conn_lock);
	}
	pthread_mutex_unlock(&qp->send_lock);
}

void sr_net_qp_release(struct sr_qp *qp)
{
	qp->conn = NULL;
}

/* a QP of this process (by number) on a device whose port is down */
static bool qpn_port_down(uint32_t qpn)
{
	struct sr_qp *qp = sr_qp_get(qpn);
	bool down;

	if (!qp)
		return false;
	down = sr_dev_port_down(sr_dev_index(qp->ibv.context->device));
	sr_qp_put(qp);
	return down;
}

/*
 * A message from or to a port that is down is lost, as on a link that is
 * down: a request's loss shows as the requester's transport timeout (and, the
 * retries spent, RETRY_EXC_ERR), a response's as well.
 */
bool sr_net_port_down(const struct sr_hdr *h)
{
	return atomic_load(&sr_ports_down) && (qpn_port_down(h->src_qpn) || qpn_port_down(h->dst_qpn));
}

static bool qp_port_down(struct sr_qp *qp)
{
	return atomic_load(&sr_ports_down) && sr_dev_port_down(sr_dev_index(qp->ibv.context->device));
}

/* send_lock held */
int sr_net_send(struct sr_qp *qp, struct sr_hdr *h, const struct iovec *iov, int iovcnt)
{
	if (qp_port_down(qp) || (qp->remote_inst == my_inst && sr_net_port_down(h)))
		return 0; /* lost: the requester's timer retries */
	if (qp->remote_inst == my_inst) {
		struct sr_src s = { .iov = iov, .iovcnt = iovcnt, .left = payload_len(h) };

		sr_hwc_add(SR_HWC_RCVD_PKTS, 1);
		sr_resp_handle(NULL, h, &s);
		return 0;
	}
	if (!qp->conn || atomic_load(&qp->conn->dead))
		qp->conn = conn_get(qp->remote_inst, &qp->attr.ah_attr.grh.dgid);
	if (!qp->conn)
		return -1;
	return conn_send(qp->conn, h, iov, iovcnt);
}

void flush_ack(struct sr_conn *c)
{
	if (c->has_ack) {
		c->has_ack = false;
		sr_hwc_add(SR_HWC_SENT_PKTS, 1);
		conn_send(c, &c->pending_ack, NULL, 0);
	}
}

/*
 * Replies go back on the path the request came from. On the wire, ACKs are
 * coalesced while a batch of requests is being handled (IBA 9.7.5.1.1: an ACK
 * acknowledges every earlier PSN); any other reply first releases the held ACK
 * so that responses stay in PSN order.
 */
bool sr_net_is_local(struct sr_qp *qp)
{
	return qp->remote_inst == my_inst;
}

/* send_lock held: several requests of one QP in one system call */
int sr_net_send_batch(struct sr_qp *qp, struct iovec *v, int cnt)
{
	if (qp_port_down(qp))
		return 0;
	if (!qp->conn || atomic_load(&qp->conn->dead))
		qp->conn = conn_get(qp->remote_inst, &qp->attr.ah_attr.grh.dgid);
	if (!qp->conn)
		return -1;
	return conn_sendv(qp->conn, v, cnt);
}

void sr_net_reply(struct sr_conn *conn, struct sr_hdr *h, const struct iovec *iov, int iovcnt)
{
	if (sr_net_port_down(h))
		return;
	if (!conn) {
		struct sr_src s = { .iov = iov, .iovcnt = iovcnt, .left = payload_len(h) };

		/* a response inside the process: sent and received here */
		sr_hwc_add(SR_HWC_SENT_PKTS, 1);
		sr_hwc_add(SR_HWC_RCVD_PKTS, 1);
		sr_comp_handle(h, &s);
		return;
	}
	if (h->op == SR_OP_ACK) {
		if (conn->has_ack && (conn->pending_ack.src_qpn != h->src_qpn ||
				      conn->pending_ack.dst_qpn != h->dst_qpn))
			flush_ack(conn);
		conn->pending_ack = *h;
		conn->has_ack = true;
		return;
	}
	flush_ack(conn);
	sr_hwc_add(SR_HWC_SENT_PKTS, 1);
	conn_send(conn, h, iov, iovcnt);
}

/* ---- exit ----------------------------------------------------------------------- */
/*
 * exit(): a message handled by the progress thread may have produced a
 * completion that the application saw, and exited on, before its ACK went out
 * (the ACK follows the completion and is held until the end of a batch to be
 * coalesced). On hardware the adapter answers regardless of the process; here
 * the held ACKs and the queued output still leave, within a bound, before the
 * process is gone (ibv_rc_pingpong's server saw its last SEND flushed).
 */
__attribute__((destructor)) static void net_exit(void)
{
	uint64_t end = sr_now_ns() + 200000000ull;

	if (listen_fd < 0)
		return;
	no_block = true; /* a full peer must not hold the exit */
	for (struct sr_conn *c = atomic_load(&all_conns); c; c = c->all_next) {
		bool locked = false;

		if (atomic_load(&c->dead))
			continue;
		/* whoever holds the reader role is inside a batch: its ACK goes out when it ends */
		while (!(locked = !pthread_mutex_trylock(&c->rlock)) && sr_now_ns() < end)
			usleep(50);
		if (!locked)
			continue;
		flush_ack(c);
		pthread_mutex_unlock(&c->rlock);
		while (!queue_empty(c) && !atomic_load(&c->dead) && sr_now_ns() < end) {
			if (!pthread_mutex_trylock(&c->wlock))
				writer_release(c, false);
			if (!queue_empty(c))
				usleep(50);
		}
	}
}
