/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The progress thread (epoll) reads incoming messages (sr_recv.c), accepts
 * connections, runs RNR and transport timers, notices peers that die
 * (EOF/reset), and steps aside while threads busy-poll. sr_net_start starts
 * the wire: listening sockets, registry entry, the thread.
 */
#define _GNU_SOURCE
#include "sr_net_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>

/*
 * After the rings brought messages the thread keeps reading them for
 * LINGER_NS before it asks for a wakeup and sleeps: a stream of small
 * messages then costs no wakeup (eventfd write, context switch, and on a small
 * machine a preempted writer) per burst. Idle, it sleeps as before.
 */
#define LINGER_NS      30000ull
#define LINGER_SPIN_NS 4000ull

static int wake_fd = -1;
static pthread_once_t net_once = PTHREAD_ONCE_INIT;
static int net_err;
/* last time a thread polled the sockets itself (poll_cq on an empty CQ) */
_Atomic uint64_t last_poll_ns;
atomic_int tcp_parked;           /* TCP connections with EPOLLIN off (progress thread) */

static inline bool ring_live(struct sr_conn *c)
{
	return c->is_unix && atomic_load_explicit(&c->shm_ready, memory_order_acquire) &&
	       !atomic_load_explicit(&c->dead, memory_order_relaxed);
}

/*
 * A thread armed a CQ and is about to sleep: the progress thread must receive
 * again, or, for a CQ with a completion channel, the channel's doorbell
 * covers the rings (sr_net_arm_doorbell): the writer then wakes the waiting
 * thread itself, which receives, and the progress thread stays asleep. The
 * rings without a doorbell ask for the progress thread's wakeups right here,
 * so the progress thread, which sleeps in epoll with the rings' eventfds in
 * its set, need not be woken just to ask for them; parked TCP connections, or
 * a ring that has a message already, still need it.
 */
void sr_net_stop_polling(int slot)
{
	bool kick, polled = atomic_exchange(&last_poll_ns, 0) != 0;

	if (slot >= 0) {
		if (sr_net_arm_doorbell(slot))
			sr_net_poll(false);
		if (polled && atomic_load(&tcp_parked) > 0)
			sr_net_kick_timer();
		return;
	}
	if (!polled)
		return;
	kick = atomic_load(&tcp_parked) > 0;
	for (struct sr_conn *c = atomic_load(&all_conns); c && !kick; c = c->all_next) {
		if (ring_live(c) && sr_shm_arm_rx(&c->shm, sizeof(struct sr_hdr)))
			kick = true;
	}
	if (kick)
		sr_net_kick_timer();
}

bool sr_net_arm_doorbell(int slot)
{
	bool there = false;

	for (struct sr_conn *c = atomic_load(&all_conns); c; c = c->all_next) {
		if (ring_live(c) && sr_shm_arm_db(&c->shm, 1u << slot, sizeof(struct sr_hdr)))
			there = true;
	}
	return there;
}

/*
 * No CQ of the slot is armed any more: the progress thread covers the rings
 * again. Its wakeup is asked for first; what came in meanwhile is read here.
 * The slot's bit goes only with `release` (its last armed CQ was destroyed):
 * after an event the bit stays, so the first message that arrives before the
 * thread that took the event arms again rings the doorbell, which costs no
 * wake-up (nobody sleeps on it; the thread finds the fd readable when it next
 * waits), instead of waking the progress thread. A second message finds the
 * bit gone and wakes the progress thread as before.
 */
void sr_net_doorbell_done(int slot, bool release)
{
	bool there = false;

	for (struct sr_conn *c = atomic_load(&all_conns); c; c = c->all_next) {
		struct sr_ring_ctl *r;

		if (!ring_live(c))
			continue;
		r = c->shm.rx;
		if (sr_shm_disarm_db(&c->shm, 1u << slot, sizeof(struct sr_hdr)))
			there = true;
		if (!atomic_load_explicit(&r->rd_ev, memory_order_relaxed) &&
		    sr_shm_arm_rx(&c->shm, sizeof(struct sr_hdr)))
			there = true;
		if (!release ||
		    !(atomic_load_explicit(&r->rd_db, memory_order_relaxed) & (1u << slot)))
			continue;
		atomic_fetch_and(&r->rd_db, ~(1u << slot));
		atomic_thread_fence(memory_order_seq_cst);
		if (sr_shm_rx_avail(&c->shm) >= sizeof(struct sr_hdr))
			there = true;
	}
	if (there)
		sr_net_poll(false);
}

void sr_net_kick_timer(void)
{
	uint64_t one = 1;

	if (write(wake_fd, &one, sizeof(one)) < 0)
		sr_dbg("wakeup lost");
}

/* ---- progress thread -------------------------------------------------------------- */
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
 * result says that the thread must look again after POLL_PARK_NS. While the
 * thread lingers after ring traffic (LINGER_NS) no ring asks either: it reads
 * what is there and looks again soon. *got counts the messages handled.
 */
static bool shm_arm_all(bool pollers, bool linger, int *got)
{
	bool unarmed = false;

	*got = 0;
	for (struct sr_conn *c = atomic_load(&all_conns); c; c = c->all_next) {
		if (!c->is_unix || atomic_load(&c->dead) || !atomic_load(&c->shm_ready))
			continue;
		/* a thread blocked on a completion channel receives for itself when the doorbell rings */
		if (!pollers && sr_shm_db_armed(&c->shm))
			continue;
		if (pollers || linger) {
			sr_shm_disarm_rx(&c->shm);
			unarmed = true;
			if (pollers || sr_shm_rx_avail(&c->shm) < sizeof(struct sr_hdr) ||
			    pthread_mutex_trylock(&c->rlock))
				continue;
			*got += shm_input(c);
			pthread_mutex_unlock(&c->rlock);
			continue;
		}
		while (!atomic_load(&c->dead) && sr_shm_arm_rx(&c->shm, sizeof(struct sr_hdr))) {
			sr_shm_disarm_rx(&c->shm);
			pthread_mutex_lock(&c->rlock);
			*got += shm_input(c);
			pthread_mutex_unlock(&c->rlock);
		}
	}
	return unarmed;
}

/*
 * At each timer scan (at least every 100 ms): a ring that a doorbell covers
 * and whose messages nobody read since the last scan is read here. The
 * thread that armed the CQ may not wait on its channel yet (it computes),
 * while a peer waits for an ACK or a READ response; and the timers must see
 * the responses that came in before they retry.
 */
static void doorbell_rescue(void)
{
	for (struct sr_conn *c = atomic_load(&all_conns); c; c = c->all_next) {
		uint32_t head;

		if (!ring_live(c) || !sr_shm_db_armed(&c->shm))
			continue;
		head = c->shm.rx_head;
		if (sr_shm_rx_avail(&c->shm) >= sizeof(struct sr_hdr) && head == c->scan_head &&
		    !pthread_mutex_trylock(&c->rlock)) {
			shm_input(c);
			pthread_mutex_unlock(&c->rlock);
		}
		c->scan_head = c->shm.rx_head;
	}
}

/* lingering: a short spin on the rings (loads only), then the CPU is offered to others */
static void linger_pause(void)
{
	uint64_t end = sr_now_ns() + LINGER_SPIN_NS;

	do {
		for (struct sr_conn *c = atomic_load(&all_conns); c; c = c->all_next) {
			if (ring_live(c) && !sr_shm_db_armed(&c->shm) &&
			    sr_shm_rx_avail(&c->shm) >= sizeof(struct sr_hdr))
				return;
		}
		for (int i = 0; i < 32; i++)
			sr_cpu_relax();
	} while (sr_now_ns() < end);
	sched_yield();
}

static void *progress(void *unused)
{
	struct epoll_event evs[64];
	uint64_t next_scan = 0, last_rx = 0;
	int parked = 0;
	bool have_pwait2 = true;        /* Linux 5.11: timeouts below a millisecond */

	(void)unused;
	no_block = true;
	for (;;) {
		uint64_t now = sr_now_ns(), wait_ns;
		bool pollers, linger;
		int n, got;

		if (now >= next_scan) {
			struct scan_arg a = { now, now + 100000000ull };

			doorbell_rescue();
			sr_port_files_check(now);
			sr_qp_foreach(scan_qp, &a);
			next_scan = a.next;
		}
		if (parked && now - atomic_load(&last_poll_ns) >= POLL_PARK_NS) {
			unpark_all();
			parked = 0;
		}
		wait_ns = next_scan - now;
		pollers = now - atomic_load(&last_poll_ns) < POLL_PARK_NS;
		linger = !pollers && now - last_rx < LINGER_NS;
		if ((shm_arm_all(pollers, linger, &got) || parked) && wait_ns > POLL_PARK_NS)
			wait_ns = POLL_PARK_NS;
		if (got)
			last_rx = sr_now_ns();
		if (got || linger)
			wait_ns = 0;
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
		if (linger && !got && n <= 0)
			linger_pause();
	}
	return NULL;
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

int sr_net_start(void)
{
	pthread_once(&net_once, net_init);
	if (net_err) {
		errno = net_err;
		return -1;
	}
	return 0;
}
