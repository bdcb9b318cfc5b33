/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared-memory rings between two instances of one host (see sr_shm.h).
 *
 * The connecting instance creates a memfd holding one control page and two
 * rings (connector -> acceptor, acceptor -> connector) and hands it over on a
 * Unix socket together with its eventfd (sr_net.c does the handshake). Each
 * ring is single-producer / single-consumer: the connection's writer and
 * reader roles (wlock / rlock, sr_net_int.h) make sure of that. A busy poller
 * of the receiving process reads a ring directly; a sleeping side is woken
 * only when it said so in the ring's wait flags: by futex(2) for a thread
 * waiting inside a message, by the eventfd for the progress thread, by the
 * doorbells of its completion channels for threads blocked on them (those
 * take precedence: the woken thread reads the ring itself).
 */
#define _GNU_SOURCE
#include "sr_shm.h"
#include "sr_util.h"

#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define CTL_SIZE 4096
#define MAP_LEN  (CTL_SIZE + 2 * (size_t)SR_SHM_RING)
#define SPIN_NS  20000          /* spin this long before sleeping inside a message */
#define TX_SLICE_MS 20

_Static_assert((SR_SHM_RING & (SR_SHM_RING - 1)) == 0, "ring size is a power of two");
_Static_assert(2 * sizeof(struct sr_ring_ctl) <= CTL_SIZE, "control page");

static void futex_wait(_Atomic uint32_t *w, uint32_t val, int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };

	/* shared futex: the word lives in memory of two processes */
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT, val, &ts, NULL, 0);
}

static void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

static void efd_signal(int fd)
{
	uint64_t one = 1;

	/* a full counter still wakes the reader: nothing to do on EAGAIN */
	if (write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		return;
}

static void setup(struct sr_shm *s, uint8_t *base, int role)
{
	struct sr_ring_ctl *c = (struct sr_ring_ctl *)(void *)base;
	uint8_t *d0 = base + CTL_SIZE, *d1 = d0 + SR_SHM_RING;

	s->map = base;
	s->map_len = MAP_LEN;
	s->tx = role == 0 ? &c[0] : &c[1];
	s->rx = role == 0 ? &c[1] : &c[0];
	s->txd = role == 0 ? d0 : d1;
	s->rxd = role == 0 ? d1 : d0;
	s->tx_tail = atomic_load(&s->tx->tail);
	s->tx_head_seen = atomic_load(&s->tx->head);
	s->rx_head = atomic_load(&s->rx->head);
}

int sr_shm_create(struct sr_shm *s, int *memfd)
{
	int fd = memfd_create("softrdma-wire", MFD_CLOEXEC);
	void *p;

	if (fd < 0)
		return -1;
	if (ftruncate(fd, (off_t)MAP_LEN)) {
		close(fd);
		return -1;
	}
	p = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		close(fd);
		return -1;
	}
	setup(s, p, 0);
	*memfd = fd;
	return 0;
}

int sr_shm_attach(struct sr_shm *s, int memfd)
{
	struct stat st;
	void *p;

	/* the peer chose the size: it must be exactly ours, or a ring would run off the map */
	if (fstat(memfd, &st) || !S_ISREG(st.st_mode) || (size_t)st.st_size != MAP_LEN) {
		errno = EPROTO;
		return -1;
	}
	p = mmap(NULL, MAP_LEN, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (p == MAP_FAILED)
		return -1;
	setup(s, p, 1);
	return 0;
}

void sr_shm_detach(struct sr_shm *s)
{
	if (s->map)
		mmap(s->map, s->map_len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0);
	s->tx_tail = s->tx_head_seen = s->rx_head = 0;
	if (s->my_efd >= 0)
		close(s->my_efd);
	if (s->peer_efd >= 0)
		close(s->peer_efd);
	s->my_efd = s->peer_efd = -1;
	for (int i = 0; i < s->n_peer_db; i++)
		close(s->peer_db[i]);
	s->n_peer_db = 0;
}

/* ---- consumer ----------------------------------------------------------------- */
uint32_t sr_shm_rx_avail(struct sr_shm *s)
{
	return atomic_load_explicit(&s->rx->tail, memory_order_acquire) - s->rx_head;
}

void sr_shm_rx_get(struct sr_shm *s, void *dst, size_t len)
{
	uint32_t off = s->rx_head & (SR_SHM_RING - 1);
	size_t n = SR_SHM_RING - off < len ? SR_SHM_RING - off : len;

	if (dst) {
		sr_copy(dst, s->rxd + off, n);
		sr_copy((uint8_t *)dst + n, s->rxd, len - n);
	}
	s->rx_head += (uint32_t)len;
}

void sr_shm_rx_release(struct sr_shm *s)
{
	struct sr_ring_ctl *r = s->rx;

	if (atomic_load_explicit(&r->head, memory_order_relaxed) == s->rx_head)
		return;
	atomic_store_explicit(&r->head, s->rx_head, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->wr_fx, memory_order_relaxed)) {
		uint32_t used = atomic_load_explicit(&r->tail, memory_order_relaxed) - s->rx_head;

		if (SR_SHM_RING - used >= atomic_load_explicit(&r->wr_need, memory_order_relaxed) &&
		    atomic_exchange(&r->wr_fx, 0))
			futex_wake(&r->head);
	}
	if (atomic_load_explicit(&r->wr_ev, memory_order_relaxed) && atomic_exchange(&r->wr_ev, 0))
		efd_signal(s->peer_efd);
}

int sr_shm_wait_data(struct sr_shm *s, int timeout_ms, int slice_ms, const atomic_bool *stop)
{
	struct sr_ring_ctl *r = s->rx;
	uint64_t start = sr_clock_ns(), end = start + (uint64_t)timeout_ms * 1000000ull;

	while (!sr_shm_rx_avail(s)) {
		uint64_t now = sr_clock_ns();
		uint32_t t;

		if (atomic_load(stop) || now >= end)
			return -1;
		if (now - start < SPIN_NS) {
			sr_cpu_relax();
			continue;
		}
		atomic_store(&r->rd_fx, 1);
		atomic_thread_fence(memory_order_seq_cst);
		t = atomic_load(&r->tail);
		if (t == s->rx_head)
			futex_wait(&r->tail, t, slice_ms);
	}
	atomic_store_explicit(&r->rd_fx, 0, memory_order_relaxed);
	return 0;
}

bool sr_shm_arm_rx(struct sr_shm *s, uint32_t min)
{
	atomic_store(&s->rx->rd_ev, 1);
	atomic_thread_fence(memory_order_seq_cst);
	return sr_shm_rx_avail(s) >= min;
}

bool sr_shm_arm_db(struct sr_shm *s, uint32_t bits, uint32_t min)
{
	/* an RMW only when a bit is missing: re-arming a covered ring touches no shared line */
	if ((atomic_load_explicit(&s->rx->rd_dbw, memory_order_relaxed) & bits) != bits)
		atomic_fetch_or(&s->rx->rd_dbw, bits);
	if ((atomic_load_explicit(&s->rx->rd_db, memory_order_relaxed) & bits) != bits)
		atomic_fetch_or(&s->rx->rd_db, bits);
	atomic_thread_fence(memory_order_seq_cst);
	return sr_shm_rx_avail(s) >= min;
}

bool sr_shm_disarm_db(struct sr_shm *s, uint32_t bits, uint32_t min)
{
	if (atomic_load_explicit(&s->rx->rd_dbw, memory_order_relaxed) & bits)
		atomic_fetch_and(&s->rx->rd_dbw, ~bits);
	/* a message published while the bits were set woke nobody: look */
	atomic_thread_fence(memory_order_seq_cst);
	return sr_shm_rx_avail(s) >= min;
}

bool sr_shm_db_armed(struct sr_shm *s)
{
	return atomic_load_explicit(&s->rx->rd_db, memory_order_relaxed) != 0;
}

void sr_shm_disarm_rx(struct sr_shm *s)
{
	if (atomic_load_explicit(&s->rx->rd_ev, memory_order_relaxed))
		atomic_store_explicit(&s->rx->rd_ev, 0, memory_order_relaxed);
}

/* ---- producer ----------------------------------------------------------------- */
uint32_t sr_shm_tx_space(struct sr_shm *s)
{
	uint32_t free = SR_SHM_RING - (s->tx_tail - s->tx_head_seen);

	if (free < SR_SHM_RING / 2) {
		s->tx_head_seen = atomic_load_explicit(&s->tx->head, memory_order_acquire);
		free = SR_SHM_RING - (s->tx_tail - s->tx_head_seen);
	}
	return free;
}

void sr_shm_tx_put(struct sr_shm *s, const void *src, size_t len)
{
	uint32_t off = s->tx_tail & (SR_SHM_RING - 1);
	size_t n = SR_SHM_RING - off < len ? SR_SHM_RING - off : len;

	sr_copy(s->txd + off, src, n);
	sr_copy(s->txd, (const uint8_t *)src + n, len - n);
	s->tx_tail += (uint32_t)len;
}

void sr_shm_tx_publish(struct sr_shm *s)
{
	struct sr_ring_ctl *r = s->tx;

	atomic_store_explicit(&r->tail, s->tx_tail, memory_order_release);
	atomic_thread_fence(memory_order_seq_cst);
	if (atomic_load_explicit(&r->rd_fx, memory_order_relaxed) && atomic_exchange(&r->rd_fx, 0))
		futex_wake(&r->tail);
	/*
	 * A thread blocked on a completion channel reads the ring itself when its
	 * doorbell rings; the progress thread then stays asleep (its rd_ev stays
	 * set for a later message that no doorbell covers).
	 */
	if (atomic_load_explicit(&r->rd_db, memory_order_relaxed)) {
		uint32_t bits = atomic_exchange(&r->rd_db, 0);

		for (int i = 0; i < s->n_peer_db; i++)
			if (bits & (1u << i))
				efd_signal(s->peer_db[i]);
		if (bits && s->n_peer_db)
			return;
	}
	/* a thread armed on a doorbell is awake after its ring and looks before it waits again */
	if (s->n_peer_db && atomic_load_explicit(&r->rd_dbw, memory_order_relaxed))
		return;
	if (atomic_load_explicit(&r->rd_ev, memory_order_relaxed) && atomic_exchange(&r->rd_ev, 0))
		efd_signal(s->peer_efd);
}

int sr_shm_wait_space(struct sr_shm *s, uint32_t need, int timeout_ms, const atomic_bool *stop)
{
	struct sr_ring_ctl *r = s->tx;
	uint64_t start = sr_clock_ns(), end = start + (uint64_t)timeout_ms * 1000000ull;

	if (need > SR_SHM_RING)
		need = SR_SHM_RING;
	while (sr_shm_tx_space(s) < need) {
		uint64_t now = sr_clock_ns();
		uint32_t h;

		if (atomic_load(stop) || now >= end)
			return -1;
		if (now - start < SPIN_NS) {
			sr_cpu_relax();
			s->tx_head_seen = atomic_load_explicit(&r->head, memory_order_acquire);
			continue;
		}
		atomic_store(&r->wr_need, need);
		atomic_store(&r->wr_fx, 1);
		atomic_thread_fence(memory_order_seq_cst);
		h = atomic_load(&r->head);
		s->tx_head_seen = h;
		if (SR_SHM_RING - (s->tx_tail - h) < need)
			futex_wait(&r->head, h, TX_SLICE_MS);
	}
	atomic_store_explicit(&r->wr_fx, 0, memory_order_relaxed);
	return 0;
}

bool sr_shm_arm_tx(struct sr_shm *s)
{
	atomic_store(&s->tx->wr_ev, 1);
	atomic_thread_fence(memory_order_seq_cst);
	s->tx_head_seen = atomic_load(&s->tx->head);
	return s->tx_tail - s->tx_head_seen < SR_SHM_RING;
}

void sr_shm_wake_local(struct sr_shm *s)
{
	futex_wake(&s->rx->tail);
	futex_wake(&s->tx->head);
}

/* ---- descriptor passing ----------------------------------------------------------- */
int sr_shm_send_fds(int sock, const void *msg, size_t len, const int *fds, int nfds)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE(SR_SHM_MAX_FDS * sizeof(int))];
	} u;
	struct iovec v = { (void *)msg, len };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1 };
	ssize_t n;

	memset(&u, 0, sizeof(u));
	if (nfds) {
		m.msg_control = u.buf;
		m.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		u.h.cmsg_level = SOL_SOCKET;
		u.h.cmsg_type = SCM_RIGHTS;
		u.h.cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(&u.h), fds, (size_t)nfds * sizeof(int));
	}
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	return n == (ssize_t)len ? 0 : -1;
}

ssize_t sr_shm_recv_fds(int sock, void *msg, size_t len, int *fds, int *nfds)
{
	union {
		struct cmsghdr h;
		char buf[CMSG_SPACE((SR_SHM_MAX_FDS + 2) * sizeof(int))];
	} u;
	struct iovec v = { msg, len };
	struct msghdr m = { .msg_iov = &v, .msg_iovlen = 1, .msg_control = u.buf,
			    .msg_controllen = sizeof(u.buf) };
	int want = *nfds, got = 0;
	ssize_t n;

	for (int i = 0; i < want; i++)
		fds[i] = -1;
	do
		n = recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c)) {
		int k;

		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
		for (int i = 0; i < k; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + (size_t)i * sizeof(int), sizeof(fd));
			if (got < want)
				fds[got++] = fd;
			else
				close(fd); /* more than we asked for: not ours to keep */
		}
	}
	*nfds = got;
	if (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
		for (int i = 0; i < got; i++)
			close(fds[i]);
		*nfds = 0;
		errno = EPROTO;
		return -1;
	}
	return n;
}
