/* SPDX-License-Identifier: Apache-2.0 */
/* Completion queues and completion channels. */
#define _GNU_SOURCE
#include "sr.h"
#include "sr_shm.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/*
 * Doorbells: SR_DB_SLOTS eventfds per process, handed to every same-host
 * peer with the rings. Channels take the slots in turn; a ring rings the
 * slots whose bits a waiting thread set (sr_net_arm_doorbell), so the thread
 * blocked on the channel is woken by the writer itself, with no progress
 * thread in between. db_armed counts the armed CQs of each slot's channels
 * (under the CQs' locks): while it is non-zero the slot keeps the rings.
 */
static int db_fd[SR_DB_SLOTS];
static int db_err;
static pthread_once_t db_once = PTHREAD_ONCE_INIT;
static atomic_int db_armed[SR_DB_SLOTS];
static atomic_uint db_next;

static void db_init(void)
{
	for (int i = 0; i < SR_DB_SLOTS; i++) {
		db_fd[i] = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
		if (db_fd[i] < 0) {
			db_err = errno;
			while (i--)
				close(db_fd[i]);
			return;
		}
	}
}

int sr_doorbell_fds(int *fds)
{
	pthread_once(&db_once, db_init);
	if (db_err) {
		errno = db_err;
		return -1;
	}
	memcpy(fds, db_fd, sizeof(db_fd));
	return 0;
}

static bool is_cq(struct ibv_cq *cq)
{
	return cq && ((struct sr_cq *)cq)->magic == SR_MAGIC_CQ;
}

SR_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct sr_comp_channel *ch;
	struct epoll_event ev = { .events = EPOLLIN };
	int p[2], db[SR_DB_SLOTS], ep, err;

	if (!ctx || ctx->abi_compat != __VERBS_ABI_IS_EXTENDED) {
		errno = EINVAL;
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	if (sr_doorbell_fds(db)) {
		free(ch);
		return NULL;
	}
	/* the pipe carries one CQ pointer per event; ibv_get_cq_event blocks in poll on ibv.fd
	 * unless the application made that O_NONBLOCK */
	if (pipe2(p, O_CLOEXEC | O_NONBLOCK)) {
		free(ch);
		return NULL;
	}
	ch->slot = (int)(atomic_fetch_add(&db_next, 1) % SR_DB_SLOTS);
	ep = epoll_create1(EPOLL_CLOEXEC);
	if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) ||
	    epoll_ctl(ep, EPOLL_CTL_ADD, db[ch->slot], &ev)) {
		err = errno;
		if (ep >= 0)
			close(ep);
		close(p[0]);
		close(p[1]);
		free(ch);
		errno = err;
		return NULL;
	}
	ch->ibv.context = ctx;
	ch->ibv.fd = ep;
	ch->ibv.refcnt = 0;
	ch->rfd = p[0];
	ch->wfd = p[1];
	ch->magic = SR_MAGIC_CH;
	sr_count(SR_K_COMP_CHANNEL, 1);
	return &ch->ibv;
}

SR_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)ibch;
	void *p;

	if (!ibch || ch->magic != SR_MAGIC_CH)
		return EINVAL;
	if (atomic_load(&ch->users))
		return EBUSY;
	ch->magic = SR_MAGIC_DEAD;
	/*
	 * Events nobody read may name CQs destroyed since (kept as zombies until their events are read, see
	 * ibv_destroy_cq): read them now so those CQs are freed, not leaked.
	 */
	while (read(ch->rfd, &p, sizeof(p)) == (ssize_t)sizeof(p)) {
		struct sr_cq *c = p;

		if (atomic_fetch_sub(&c->ev_pending, 1) == 1 && atomic_load(&c->zombie) &&
		    atomic_exchange(&c->zombie, false))
			free(c);
	}
	close(ch->ibv.fd);
	close(ch->rfd);
	close(ch->wfd);
	sr_count(SR_K_COMP_CHANNEL, -1);
	free(ch);
	return 0;
}

static uint32_t roundup_pow2(uint32_t v)
{
	uint32_t r = 1;

	while (r < v)
		r <<= 1;
	return r;
}

SR_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *cq_context,
				       struct ibv_comp_channel *channel, int comp_vector)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)channel;
	struct sr_cq *cq;

	if (!ctx || ctx->abi_compat != __VERBS_ABI_IS_EXTENDED || cqe < 1 || cqe > SR_MAX_CQE ||
	    comp_vector < 0 || comp_vector >= ctx->num_comp_vectors ||
	    (channel && ch->magic != SR_MAGIC_CH)) {
		errno = EINVAL;
		return NULL;
	}
	if (atomic_load(&sr_counts[SR_K_CQ]) >= SR_MAX_CQ) {
		errno = ENOMEM;
		return NULL;
	}
	cq = calloc(1, sizeof(*cq));
	if (!cq) {
		errno = ENOMEM;
		return NULL;
	}
	cq->size = roundup_pow2((uint32_t)cqe + 1);
	if (cq->size < (uint32_t)cqe)
		cq->size = (uint32_t)cqe;
	cq->ring = calloc(cq->size, sizeof(*cq->ring));
	if (!cq->ring) {
		free(cq);
		errno = ENOMEM;
		return NULL;
	}
	sr_mutex_init(&cq->lock);
	cq->ibv.context = ctx;
	cq->ibv.channel = channel;
	cq->ibv.cq_context = cq_context;
	cq->ibv.cqe = (int)cq->size;
	pthread_mutex_init(&cq->ibv.mutex, NULL);
	pthread_cond_init(&cq->ibv.cond, NULL);
	cq->chan = ch;
	if (ch)
		atomic_fetch_add(&ch->users, 1);
	cq->magic = SR_MAGIC_CQ;
	sr_count(SR_K_CQ, 1);
	sr_dbg("create_cq %p cqe %d -> %u%s", (void *)cq, cqe, cq->size, channel ? " (channel)" : "");
	return &cq->ibv;
}

SR_EXPORT int ibv_destroy_cq(struct ibv_cq *ibcq)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;

	if (!is_cq(ibcq))
		return EINVAL;
	/* as the kernel: a CQ that QPs still use cannot be destroyed */
	if (atomic_load(&cq->users))
		return EBUSY;
	/*
	 * ibv_get_cq_event(3): "destroying a CQ will wait for all completion
	 * events to be acknowledged". The thread that got an event may use the
	 * CQ until it acks; the CQ dies under ibv.mutex, which ibv_get_cq_event
	 * holds while it checks the CQ and counts the event.
	 */
	/* no QP left to overrun it: unread CQ_ERR events go, returned ones must be acked */
	sr_async_forget(ibcq->context, ibcq, &cq->async_reported, &cq->async_acked);
	pthread_mutex_lock(&ibcq->mutex);
	while (ibcq->comp_events_completed != cq->comp_reported)
		pthread_cond_wait(&ibcq->cond, &ibcq->mutex);
	cq->magic = SR_MAGIC_DEAD;
	pthread_mutex_unlock(&ibcq->mutex);
	pthread_mutex_lock(&cq->lock);
	if (cq->armed && cq->chan && atomic_fetch_sub(&db_armed[cq->chan->slot], 1) == 1) {
		cq->armed = 0;
		pthread_mutex_unlock(&cq->lock);
		sr_net_doorbell_done(cq->chan->slot, true);
	} else {
		cq->armed = 0;
		pthread_mutex_unlock(&cq->lock);
	}
	if (cq->chan)
		atomic_fetch_sub(&cq->chan->users, 1);
	pthread_mutex_destroy(&cq->lock);
	free(cq->ring);
	cq->ring = NULL;
	sr_count(SR_K_CQ, -1);
	/*
	 * Events still in the channel name this CQ: the memory stays until
	 * ibv_get_cq_event has read (and skipped) them.
	 */
	atomic_store(&cq->zombie, true);
	if (atomic_load(&cq->ev_pending) == 0 && atomic_exchange(&cq->zombie, false))
		free(cq);
	return 0;
}

SR_EXPORT int ibv_resize_cq(struct ibv_cq *ibcq, int cqe)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;
	struct ibv_wc *ring;
	uint32_t size;

	if (!is_cq(ibcq) || cqe < 1 || cqe > SR_MAX_CQE)
		return EINVAL;
	size = roundup_pow2((uint32_t)cqe + 1);
	if (size < (uint32_t)cqe)
		size = (uint32_t)cqe;
	pthread_mutex_lock(&cq->lock);
	if (size < cq->count) {
		pthread_mutex_unlock(&cq->lock);
		return EINVAL;
	}
	ring = calloc(size, sizeof(*ring));
	if (!ring) {
		pthread_mutex_unlock(&cq->lock);
		return ENOMEM;
	}
	for (uint32_t i = 0; i < cq->count; i++)
		ring[i] = cq->ring[(cq->head + i) % cq->size];
	free(cq->ring);
	cq->ring = ring;
	cq->size = size;
	cq->head = 0;
	cq->ibv.cqe = (int)size;
	pthread_mutex_unlock(&cq->lock);
	return 0;
}

/*
 * Add one CQE. A full CQ is an overrun: IBA 11.4.2.1 makes it a CQ error,
 * reported by the asynchronous event IBV_EVENT_CQ_ERR; the CQE is lost.
 */
void sr_cq_push(struct sr_cq *cq, const struct ibv_wc *wc, bool solicited)
{
	bool notify = false, overrun = false;

	pthread_mutex_lock(&cq->lock);
	if (cq->count == cq->size) {
		overrun = !cq->overflow;
		cq->overflow = true;
	} else {
		cq->ring[(cq->head + cq->count) % cq->size] = *wc;
		cq->count++;
		if (cq->armed == 1 || (cq->armed == 2 && (solicited || wc->status != IBV_WC_SUCCESS))) {
			cq->armed = 0;
			notify = true;
			/* the doorbell's rings are handed back by the thread that takes the event */
			if (cq->chan)
				atomic_fetch_sub(&db_armed[cq->chan->slot], 1);
		}
	}
	pthread_mutex_unlock(&cq->lock);
	if (notify && cq->chan) {
		void *p = cq;

		atomic_fetch_add(&cq->ev_pending, 1);
		if (write(cq->chan->wfd, &p, sizeof(p)) != sizeof(p)) {
			atomic_fetch_sub(&cq->ev_pending, 1);
			sr_dbg("completion event lost (channel full)");
		}
	}
	if (overrun) {
		sr_dbg("CQ %p overrun", (void *)cq);
		sr_async_event(cq->ibv.context, IBV_EVENT_CQ_ERR, &cq->ibv);
	}
}

int sr_poll_cq(struct ibv_cq *ibcq, int n, struct ibv_wc *wc)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;
	int got = 0;

	if (!is_cq(ibcq) || n < 0 || (n && !wc))
		return -EINVAL;
	if (!__atomic_load_n(&cq->count, __ATOMIC_RELAXED) && !cq->overflow) {
		bool busy = !cq->armed;

		if (!sr_net_poll(busy) || !__atomic_load_n(&cq->count, __ATOMIC_RELAXED)) {
			if (busy)
				sr_net_poll_empty();
			return 0;
		}
	}
	pthread_mutex_lock(&cq->lock);
	if (cq->overflow && !cq->count) {
		pthread_mutex_unlock(&cq->lock);
		return -EOVERFLOW;
	}
	while (got < n && cq->count) {
		wc[got++] = cq->ring[cq->head];
		cq->head = (cq->head + 1) % cq->size;
		cq->count--;
	}
	pthread_mutex_unlock(&cq->lock);
	if (got)
		sr_net_poll_found();
	return got;
}

int sr_req_notify_cq(struct ibv_cq *ibcq, int solicited_only)
{
	struct sr_cq *cq = (struct sr_cq *)ibcq;

	if (!is_cq(ibcq))
		return EINVAL;
	pthread_mutex_lock(&cq->lock);
	if (!cq->armed && cq->chan)
		atomic_fetch_add(&db_armed[cq->chan->slot], 1);
	/* an earlier "any" request is not weakened by a solicited-only one */
	if (cq->armed != 1)
		cq->armed = solicited_only ? 2 : 1;
	pthread_mutex_unlock(&cq->lock);
	sr_net_stop_polling(cq->chan ? cq->chan->slot : -1);
	return 0;
}

/* the next event in the pipe: 1 (*out set), 0 none yet, -1 error */
static int take_event(struct sr_comp_channel *ch, struct sr_cq **out)
{
	void *p;
	ssize_t n;
	bool live;

	for (;;) {
		struct sr_cq *c;

		n = read(ch->rfd, &p, sizeof(p));
		if (n != sizeof(p)) {
			if (n < 0 && errno == EAGAIN)
				return 0;
			if (n >= 0)
				errno = EIO;
			return -1;
		}
		c = p;
		/* the pending event keeps the memory; a live CQ counts it as reported
		 * (ibv_destroy_cq then waits for its ack) */
		pthread_mutex_lock(&c->ibv.mutex);
		live = c->magic == SR_MAGIC_CQ;
		if (live)
			c->comp_reported++;
		pthread_mutex_unlock(&c->ibv.mutex);
		if (atomic_fetch_sub(&c->ev_pending, 1) == 1 && atomic_load(&c->zombie)) {
			if (atomic_exchange(&c->zombie, false))
				free(c);
			continue;
		}
		if (live) {
			*out = c;
			return 1;
		}
	}
}

/*
 * No event in the pipe: the doorbell may have rung (a same-host peer wrote to
 * a ring while a CQ of ours was armed). The messages are received here, in
 * the waiting thread; an event they produce is in the pipe afterwards.
 * Returns true if messages were handled or one arrived while the rings were
 * re-armed for the slot's armed CQs (look at the pipe again).
 */
static bool doorbell_receive(struct sr_comp_channel *ch)
{
	uint64_t v;

	if (read(db_fd[ch->slot], &v, sizeof(v)) < 0 && errno != EAGAIN)
		sr_dbg("doorbell read: %s", strerror(errno));
	if (sr_net_poll(false) > 0)
		return true;
	/* the ringing peer took the slot's bit: a CQ still armed needs it back */
	return atomic_load(&db_armed[ch->slot]) > 0 && sr_net_arm_doorbell(ch->slot);
}

SR_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ibch, struct ibv_cq **cq, void **cq_context)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)ibch;
	struct sr_cq *c = NULL;
	int r;

	if (!ibch || ch->magic != SR_MAGIC_CH || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		struct pollfd pfd = { .fd = ibch->fd, .events = POLLIN };
		int fl;

		r = take_event(ch, &c);
		if (r)
			break;
		if (doorbell_receive(ch))
			continue;
		fl = fcntl(ibch->fd, F_GETFL);
		if (fl < 0 || (fl & O_NONBLOCK)) {
			if (fl >= 0)
				errno = EAGAIN;
			r = -1;
			break;
		}
		/* as a read of the kernel's event file: a signal ends the wait */
		if (poll(&pfd, 1, -1) < 0) {
			r = -1;
			break;
		}
	}
	if (atomic_load(&db_armed[ch->slot]) == 0) {
		int err = errno;

		sr_net_doorbell_done(ch->slot, false);
		errno = err;
	}
	if (r < 0)
		return -1;
	*cq = &c->ibv;
	*cq_context = c->ibv.cq_context;
	return 0;
}

SR_EXPORT void ibv_ack_cq_events(struct ibv_cq *ibcq, unsigned int nevents)
{
	if (!is_cq(ibcq))
		return;
	pthread_mutex_lock(&ibcq->mutex);
	ibcq->comp_events_completed += nevents;
	pthread_cond_broadcast(&ibcq->cond);
	pthread_mutex_unlock(&ibcq->mutex);
}
