/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The wire. Every process that opens the device is one instance:
 *  - it claims a small instance id in the registry directory shared by all
 *    processes of the machine ($SOFTRDMA_RUNDIR, default /tmp/softrdma-<uid>):
 *    file "<id>" is held with flock() for the life of the process and says
 *    "<pid> <tcp port>"; a dead process's lock vanishes and its id is reused;
 *  - it listens on an ephemeral TCP port on the wildcard address (IPv6
 *    dual-stack, else IPv4);
 *  - QPN = instance << 16 | index, so a peer that knows only GID + QPN (all
 *    that ibv_rc_pingpong exchanges) reads entry QPN >> 16 for the port and
 *    connects to the GID's IP address on it;
 *  - one TCP connection per pair of instances carries all their QPs' messages
 *    (struct sr_hdr + payload), TCP_NODELAY; peers inside one process call the
 *    responder and completer directly (same code, no copy to a socket).
 * A progress thread (epoll) reads incoming messages straight into MR memory,
 * runs RNR and transport timers, and notices peers that die (EOF/reset).
 * Requests are written by the posting thread itself.
 */
#define _GNU_SOURCE
#include "sr.h"
#include "sr_shm.h"

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
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>

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
	struct sr_shm shm;
};

static uint32_t my_inst;
static int listen_fd = -1, ep_fd = -1, wake_fd = -1, reg_fd = -1, unix_fd = -1;
static dev_t rundir_dev;
static ino_t rundir_ino;
static uint16_t my_port;
static char rundir[256];
static pthread_once_t net_once = PTHREAD_ONCE_INIT;
static int net_err;
static pthread_mutex_t conn_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sr_conn *conn_by_inst[SR_MAX_INSTANCES + 1];
/* live connections, walked without a lock by polling threads; dead ones are
 * unlinked but never freed (QPs and walkers may still point to them) */
static struct sr_conn *_Atomic all_conns;
static struct sr_conn *dead_conns;
/* last time a thread polled the sockets itself (poll_cq on an empty CQ) */
static _Atomic uint64_t last_poll_ns;
#define POLL_PARK_NS 200000ull
static atomic_int tcp_parked;           /* TCP connections with EPOLLIN off (progress thread) */

/* set in the progress thread and while a polling thread runs the input path:
 * such threads never block on a full socket */
static __thread bool no_block;

uint32_t sr_net_instance(void)
{
	return my_inst;
}

/* ---- payload sources ------------------------------------------------------ */
static int wait_fd(int fd, short ev)
{
	struct pollfd p = { .fd = fd, .events = ev };
	int n;

	do
		n = poll(&p, 1, IO_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	return n == 1 ? 0 : -1;
}

static bool queue_empty(struct sr_conn *c);
static void writer_release(struct sr_conn *c, bool blocking);

/*
 * A reader inside a message waits for its rest, possibly holding the QP's
 * lock (the completer copies a READ response out). Meanwhile the output this
 * process queued for any connection goes out: the peer may need it before it
 * can send the rest, e.g. when two connections join the same two instances
 * (both connected at once) and each side's reader waits on a different one
 * while the other side's threads wait for the QP lock. Returns whether some
 * output is still queued (the caller then waits in short slices).
 */
static bool flush_all_pending(void)
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
static int conn_read(struct sr_conn *c, void *dst, size_t len)
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
			memcpy(d, c->rbuf + c->rpos, n);
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
		memcpy(d, (const uint8_t *)v->iov_base + s->off, n);
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

static uint64_t payload_len(const struct sr_hdr *h)
{
	return (h->op == SR_OP_SEND || h->op == SR_OP_WRITE || h->op == SR_OP_READ_RESP) ? h->len : 0;
}

/* ---- connection output ------------------------------------------------------ */
static void arm_out(struct sr_conn *c, bool on)
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
		memcpy(d, s + skip, l - skip);
		d += l - skip;
		skip = 0;
	}
	pthread_mutex_lock(&c->qlock);
	if (c->qtail)
		c->qtail->next = p;
	else
		c->qhead = p;
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

		pthread_mutex_lock(&c->qlock);
		p = c->qhead;
		pthread_mutex_unlock(&c->qlock);
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
		c->qhead = p->next;
		if (!c->qhead)
			c->qtail = NULL;
		pthread_mutex_unlock(&c->qlock);
		free(p);
	}
}

static bool queue_empty(struct sr_conn *c)
{
	bool e;

	pthread_mutex_lock(&c->qlock);
	e = c->qhead == NULL;
	pthread_mutex_unlock(&c->qlock);
	return e;
}

/* give up the writer role without stranding frames queued meanwhile */
static void writer_release(struct sr_conn *c, bool blocking)
{
	for (;;) {
		bool all = flush_pending(c, blocking);

		if (!all)
			arm_out(c, true);
		pthread_mutex_unlock(&c->wlock);
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

static int conn_send(struct sr_conn *c, struct sr_hdr *h, const struct iovec *iov, int cnt)
{
	struct iovec v[SR_MAX_SGE + 1];

	v[0].iov_base = h;
	v[0].iov_len = sizeof(*h);
	for (int i = 0; i < cnt; i++)
		v[i + 1] = iov[i];
	return conn_sendv(c, v, cnt + 1);
}

/* ---- registry ------------------------------------------------------------------ */
/*
 * Entries are written by other processes, which may have been killed at any
 * point, and anything else may sit in the directory: an entry that is not a
 * regular file (directory, FIFO, device, symlink), cannot be opened, or holds
 * anything but "<pid> <port>" is skipped, never trusted.
 */
static int registry_open(const char *path, int flags)
{
	struct stat st;
	int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* an error that concerns one entry, not the directory or the process */
static bool entry_error(int err)
{
	return err == EINVAL || err == EISDIR || err == ELOOP || err == EACCES || err == EPERM ||
	       err == ENXIO || err == ETXTBSY || err == EWOULDBLOCK;
}

static int claim_instance(void)
{
	const char *dir = getenv("SOFTRDMA_RUNDIR");
	char path[300], buf[64];
	int last_err = EMFILE; /* every id is taken */

	if (dir && *dir) {
		if (strlen(dir) >= sizeof(rundir)) {
			snprintf(rundir, sizeof(rundir), "%.200s...", dir);
			errno = ENAMETOOLONG;
			return -1;
		}
		snprintf(rundir, sizeof(rundir), "%s", dir);
	} else {
		snprintf(rundir, sizeof(rundir), "/tmp/softrdma-%u", (unsigned)getuid());
	}
	if (mkdir(rundir, 0700) && errno != EEXIST)
		return -1;
	{
		struct stat st;

		/* names the same-host wire's sockets: instances of another registry never meet there */
		if (stat(rundir, &st))
			return -1;
		rundir_dev = st.st_dev;
		rundir_ino = st.st_ino;
	}
	for (uint32_t id = 1; id <= SR_MAX_INSTANCES; id++) {
		int fd, len;

		snprintf(path, sizeof(path), "%s/%u", rundir, id);
		fd = registry_open(path, O_RDWR | O_CREAT);
		if (fd < 0) {
			if (!entry_error(errno))
				return -1;
			/* not ours to use (another user's, not a file): the next id */
			last_err = errno;
			continue;
		}
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			int err = errno;

			close(fd);
			if (err != EWOULDBLOCK) {
				errno = err;
				return -1;
			}
			continue; /* a live instance holds it */
		}
		len = snprintf(buf, sizeof(buf), "%d %u\n", (int)getpid(), (unsigned)my_port);
		if (ftruncate(fd, 0) || pwrite(fd, buf, (size_t)len, 0) != len) {
			close(fd);
			return -1;
		}
		reg_fd = fd;
		my_inst = id;
		return 0;
	}
	errno = last_err;
	return -1;
}

/* the TCP port (and pid) of a live instance; -1 if the entry is missing, malformed or stale */
static int registry_port(uint32_t inst, int *pid_out)
{
	char path[300], buf[64] = "";
	int fd, pid = 0;
	unsigned port = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%u", rundir, inst);
	fd = registry_open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	/* a live instance holds its entry locked: an unlocked one is left by a dead process */
	if (!flock(fd, LOCK_SH | LOCK_NB)) {
		close(fd);
		sr_dbg("registry entry %s is stale (no live instance holds it)", path);
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || sscanf(buf, "%d %u", &pid, &port) != 2 || pid <= 0 || port == 0 ||
	    port > 65535)
		return -1;
	*pid_out = pid;
	return (int)port;
}

/* ---- connections ---------------------------------------------------------------- */
static struct sr_conn *conn_new(int fd)
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
static void conn_kill(struct sr_conn *c, const char *why)
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
		c->qhead = p->next;
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
	int fd, memfd = -1, fds[2], nfds = 1;

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
	if (s.my_efd < 0 || sr_shm_send_fds(fd, &h, sizeof(h), fds, 2))
		goto fail;
	pfd.fd = fd;
	if (poll(&pfd, 1, CONNECT_TIMEOUT_MS) != 1 ||
	    sr_shm_recv_fds(fd, &r, sizeof(r), &s.peer_efd, &nfds) != sizeof(r) || nfds != 1 ||
	    r.magic != SR_WIRE_MAGIC || r.op != SR_OP_HELLO || r.syndrome != inst)
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
static void shm_accept_hello(struct sr_conn *c)
{
	struct sr_hdr h, r = { .magic = SR_WIRE_MAGIC, .op = SR_OP_HELLO, .syndrome = my_inst };
	int fds[2], nfds = 2, pid = 0;
	ssize_t n = sr_shm_recv_fds(c->fd, &h, sizeof(h), fds, &nfds);
	const char *why = "bad handshake";

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n != sizeof(h) || nfds != 2 || h.magic != SR_WIRE_MAGIC || h.op != SR_OP_HELLO ||
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
	c->shm.peer_efd = fds[1];
	fds[1] = -1;
	c->shm.my_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->shm.my_efd < 0 || sr_shm_send_fds(c->fd, &r, sizeof(r), &c->shm.my_efd, 1))
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

/* send_lock held */
int sr_net_send(struct sr_qp *qp, struct sr_hdr *h, const struct iovec *iov, int iovcnt)
{
	if (qp->remote_inst == my_inst) {
		struct sr_src s = { .iov = iov, .iovcnt = iovcnt, .left = payload_len(h) };

		sr_resp_handle(NULL, h, &s);
		return 0;
	}
	if (!qp->conn || atomic_load(&qp->conn->dead))
		qp->conn = conn_get(qp->remote_inst, &qp->attr.ah_attr.grh.dgid);
	if (!qp->conn)
		return -1;
	return conn_send(qp->conn, h, iov, iovcnt);
}

static void flush_ack(struct sr_conn *c)
{
	if (c->has_ack) {
		c->has_ack = false;
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
	if (!qp->conn || atomic_load(&qp->conn->dead))
		qp->conn = conn_get(qp->remote_inst, &qp->attr.ah_attr.grh.dgid);
	if (!qp->conn)
		return -1;
	return conn_sendv(qp->conn, v, cnt);
}

void sr_net_reply(struct sr_conn *conn, struct sr_hdr *h, const struct iovec *iov, int iovcnt)
{
	if (!conn) {
		struct sr_src s = { .iov = iov, .iovcnt = iovcnt, .left = payload_len(h) };

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
	conn_send(conn, h, iov, iovcnt);
}

/*
 * A thread armed a CQ and is about to sleep: the progress thread must receive
 * again. The rings ask for wakeups right here, so the progress thread, which
 * sleeps in epoll with the rings' eventfds in its set, need not be woken just
 * to ask for them (one context switch less per blocking wait); parked TCP
 * connections, or a ring that has a message already, still need it.
 */
void sr_net_stop_polling(void)
{
	bool kick;

	if (!atomic_exchange(&last_poll_ns, 0))
		return;
	kick = atomic_load(&tcp_parked) > 0;
	for (struct sr_conn *c = atomic_load(&all_conns); c && !kick; c = c->all_next) {
		if (c->is_unix && !atomic_load(&c->dead) && atomic_load(&c->shm_ready) &&
		    sr_shm_arm_rx(&c->shm, sizeof(struct sr_hdr)))
			kick = true;
	}
	if (kick)
		sr_net_kick_timer();
}

void sr_net_kick_timer(void)
{
	uint64_t one = 1;

	if (write(wake_fd, &one, sizeof(one)) < 0)
		sr_dbg("wakeup lost");
}

/* ---- progress thread -------------------------------------------------------------- */
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
	if (sr_debug)
		sr_dbg("rx %s 0x%x -> 0x%x psn %u len %llu", sr_opcode_name(h->op), h->src_qpn,
		       h->dst_qpn, h->psn, (unsigned long long)h->len);
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
static int shm_input(struct sr_conn *c)
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
static int conn_input(struct sr_conn *c)
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

struct scan_arg {
	uint64_t now, next;
};

static void scan_qp(struct sr_qp *qp, void *arg)
{
	struct scan_arg *a = arg;

	if (!qp->timer_deadline_ns && qp->sq_head == qp->sq_next)
		return;
	sr_comp_timer(qp, a->now);
	if (qp->rnr_wait && qp->timer_deadline_ns && qp->timer_deadline_ns < a->next)
		a->next = qp->timer_deadline_ns;
}

static void set_parked(struct sr_conn *c, bool on)
{
	struct epoll_event ev = { .events = (on ? 0 : EPOLLIN) | (c->out_armed ? EPOLLOUT : 0),
				  .data.ptr = c };

	if (c->parked != on)
		atomic_fetch_add(&tcp_parked, on ? 1 : -1);
	c->parked = on;
	if (c->fd >= 0)
		epoll_ctl(ep_fd, EPOLL_CTL_MOD, c->fd, &ev);
}

/* pollers went quiet: take the parked connections back */
static void unpark_all(void)
{
	struct sr_conn *c;

	for (c = atomic_load(&all_conns); c; c = c->all_next) {
		if (!c->parked)
			continue;
		set_parked(c, false);
		pthread_mutex_lock(&c->rlock);
		conn_input(c);
		pthread_mutex_unlock(&c->rlock);
	}
}

/* the progress thread's Unix socket of a same-host connection: the handshake, then only the
 * peer's exit (EOF), after which the messages it left in the ring are still delivered */
static void shm_socket_event(struct sr_conn *c)
{
	char b;
	ssize_t n;

	pthread_mutex_lock(&c->rlock);
	if (c->fd < 0) {
		pthread_mutex_unlock(&c->rlock);
		return;
	}
	if (!c->hello_done) {
		shm_accept_hello(c);
		pthread_mutex_unlock(&c->rlock);
		return;
	}
	n = recv(c->fd, &b, 1, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
		pthread_mutex_unlock(&c->rlock);
		return;
	}
	atomic_store(&c->peer_gone, true);
	while (shm_input(c) > 0)
		;
	conn_kill(c, n == 0 ? "peer closed" : n > 0 ? "unexpected data on the hand-over socket" :
		  strerror(errno));
	pthread_mutex_unlock(&c->rlock);
}

/* the ring of a same-host connection signalled: space for queued output (input is read
 * before the thread sleeps again, in shm_arm_all) */
static void shm_wakeup(struct sr_conn *c)
{
	uint64_t v;

	if (c->shm.my_efd < 0 || read(c->shm.my_efd, &v, sizeof(v)) < 0)
		return;
	if (!queue_empty(c) && !pthread_mutex_trylock(&c->wlock))
		writer_release(c, false);
}

/*
 * Before the progress thread sleeps: each ring asks for a wakeup, and what
 * arrived meanwhile is handled. While threads busy-poll (they read the rings
 * themselves) no ring asks, so the writers make no system call at all; the
 * result says that the thread must look again after POLL_PARK_NS.
 */
static bool shm_arm_all(bool pollers)
{
	bool unarmed = false;

	for (struct sr_conn *c = atomic_load(&all_conns); c; c = c->all_next) {
		if (!c->is_unix || atomic_load(&c->dead) || !atomic_load(&c->shm_ready))
			continue;
		if (pollers) {
			sr_shm_disarm_rx(&c->shm);
			unarmed = true;
			continue;
		}
		while (!atomic_load(&c->dead) && sr_shm_arm_rx(&c->shm, sizeof(struct sr_hdr))) {
			sr_shm_disarm_rx(&c->shm);
			pthread_mutex_lock(&c->rlock);
			shm_input(c);
			pthread_mutex_unlock(&c->rlock);
		}
	}
	return unarmed;
}

static void *progress(void *unused)
{
	struct epoll_event evs[64];
	uint64_t next_scan = 0;
	int parked = 0;
	bool have_pwait2 = true;        /* Linux 5.11: timeouts below a millisecond */

	(void)unused;
	no_block = true;
	for (;;) {
		uint64_t now = sr_now_ns(), wait_ns;
		int n;

		if (now >= next_scan) {
			struct scan_arg a = { now, now + 100000000ull };

			sr_qp_foreach(scan_qp, &a);
			next_scan = a.next;
		}
		if (parked && now - atomic_load(&last_poll_ns) >= POLL_PARK_NS) {
			unpark_all();
			parked = 0;
		}
		wait_ns = next_scan - now;
		if ((shm_arm_all(now - atomic_load(&last_poll_ns) < POLL_PARK_NS) || parked) &&
		    wait_ns > POLL_PARK_NS)
			wait_ns = POLL_PARK_NS;
		if (have_pwait2) {
			struct timespec ts = { (time_t)(wait_ns / 1000000000ull), (long)(wait_ns % 1000000000ull) };

			n = epoll_pwait2(ep_fd, evs, 64, &ts, NULL);
			if (n < 0 && errno == ENOSYS) {
				have_pwait2 = false;
				continue;
			}
		} else {
			n = epoll_wait(ep_fd, evs, 64, (int)((wait_ns + 999999) / 1000000));
		}
		for (int i = 0; i < n; i++) {
			struct sr_conn *c = evs[i].data.ptr;

			if (evs[i].data.u64 & 1) {
				shm_wakeup((struct sr_conn *)(uintptr_t)(evs[i].data.u64 & ~1ull));
			} else if (c == (void *)&unix_fd) {
				int fd = accept4(unix_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

				if (fd >= 0) {
					struct sr_conn *nc = conn_new(fd);
					struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };

					if (!nc) {
						close(fd);
						continue;
					}
					nc->is_unix = true;
					ev.data.ptr = nc;
					epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd, &ev);
				}
			} else if (c && c != (void *)&wake_fd && c->is_unix) {
				shm_socket_event(c);
			} else if (!c) {
				int fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);

				if (fd >= 0) {
					struct sr_conn *nc = conn_new(fd);
					struct epoll_event ev = { .events = EPOLLIN };

					if (!nc) {
						close(fd);
						continue;
					}
					ev.data.ptr = nc;
					epoll_ctl(ep_fd, EPOLL_CTL_ADD, fd, &ev);
				}
			} else if (c == (void *)&wake_fd) {
				uint64_t v;

				if (read(wake_fd, &v, sizeof(v)) < 0)
					continue;
				next_scan = 0;
				if (parked && !atomic_load(&last_poll_ns)) {
					unpark_all();
					parked = 0;
				}
			} else {
				if (evs[i].events & EPOLLOUT) {
					if (!pthread_mutex_trylock(&c->wlock)) {
						arm_out(c, false);
						writer_release(c, false);
					}
				}
				if ((evs[i].events & (EPOLLHUP | EPOLLERR)) == 0 && c->hello_done &&
				    sr_now_ns() - atomic_load(&last_poll_ns) < POLL_PARK_NS) {
					/*
					 * Threads are busy-polling and receive for themselves:
					 * stop waking up per message (on two cores, each wakeup
					 * preempts a poller), look again after POLL_PARK_NS.
					 */
					set_parked(c, true);
					parked++;
					continue;
				}
				if (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
					pthread_mutex_lock(&c->rlock);
					conn_input(c);
					pthread_mutex_unlock(&c->rlock);
				}
			}
		}
	}
	return NULL;
}

/* the same-host wire's listener; without it (any failure) peers reach us by TCP */
static void unix_listen(void)
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

static void net_init(void)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct epoll_event ev;
	pthread_t th;
	pthread_attr_t at;
	int zero = 0, fd;

	fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		struct sockaddr_in6 a = { .sin6_family = AF_INET6, .sin6_addr = IN6ADDR_ANY_INIT };

		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero));
		if (bind(fd, (struct sockaddr *)&a, sizeof(a))) {
			close(fd);
			fd = -1;
		}
	}
	if (fd < 0) {
		struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };

		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
		if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)))
			goto fail;
	}
	if (listen(fd, 128) || getsockname(fd, (struct sockaddr *)&ss, &len))
		goto fail;
	listen_fd = fd;
	my_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
			((struct sockaddr_in *)&ss)->sin_port);
	if (claim_instance())
		goto fail;
	unix_listen();
	ep_fd = epoll_create1(EPOLL_CLOEXEC);
	wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (ep_fd < 0 || wake_fd < 0)
		goto fail;
	ev.events = EPOLLIN;
	ev.data.ptr = NULL;
	epoll_ctl(ep_fd, EPOLL_CTL_ADD, listen_fd, &ev);
	ev.data.ptr = &wake_fd;
	epoll_ctl(ep_fd, EPOLL_CTL_ADD, wake_fd, &ev);
	if (unix_fd >= 0) {
		ev.data.ptr = &unix_fd;
		epoll_ctl(ep_fd, EPOLL_CTL_ADD, unix_fd, &ev);
	}
	pthread_attr_init(&at);
	pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &at, progress, NULL))
		goto fail;
	pthread_attr_destroy(&at);
	sr_dbg("instance %u, port %u, registry %s", my_inst, (unsigned)my_port, rundir);
	return;
fail:
	net_err = errno ? errno : EIO;
	fprintf(stderr, "softrdma: cannot start the device (registry %s): %s\n", rundir,
		strerror(net_err));
}

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

int sr_net_start(void)
{
	pthread_once(&net_once, net_init);
	if (net_err) {
		errno = net_err;
		return -1;
	}
	return 0;
}
