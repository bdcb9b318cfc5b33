/* SPDX-License-Identifier: Apache-2.0 */
/* Completion queues and completion channels. */
#define _GNU_SOURCE
#include "sr.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>

static bool is_cq(struct ibv_cq *cq)
{
	return cq && ((struct sr_cq *)cq)->magic == SR_MAGIC_CQ;
}

SR_EXPORT struct ibv_comp_channel *ibv_create_comp_channel(struct ibv_context *ctx)
{
	struct sr_comp_channel *ch;
	int p[2];

	if (!ctx || ctx->abi_compat != __VERBS_ABI_IS_EXTENDED) {
		errno = EINVAL;
		return NULL;
	}
	ch = calloc(1, sizeof(*ch));
	if (!ch) {
		errno = ENOMEM;
		return NULL;
	}
	/* a pipe carries one CQ pointer per event: pollable, blocking unless O_NONBLOCK */
	if (pipe2(p, O_CLOEXEC)) {
		free(ch);
		return NULL;
	}
	fcntl(p[1], F_SETFL, O_NONBLOCK);
	ch->ibv.context = ctx;
	ch->ibv.fd = p[0];
	ch->ibv.refcnt = 0;
	ch->wfd = p[1];
	ch->magic = SR_MAGIC_CH;
	sr_count(SR_K_COMP_CHANNEL, 1);
	return &ch->ibv;
}

SR_EXPORT int ibv_destroy_comp_channel(struct ibv_comp_channel *ibch)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)ibch;

	if (!ibch || ch->magic != SR_MAGIC_CH)
		return EINVAL;
	if (atomic_load(&ch->users))
		return EBUSY;
	ch->magic = SR_MAGIC_DEAD;
	/*
	 * Events nobody read may name CQs destroyed since (kept as zombies until their events are read, see
	 * ibv_destroy_cq): read them now so those CQs are freed, not leaked.
	 */
	if (fcntl(ch->ibv.fd, F_SETFL, fcntl(ch->ibv.fd, F_GETFL) | O_NONBLOCK) == 0) {
		void *p;

		while (read(ch->ibv.fd, &p, sizeof(p)) == (ssize_t)sizeof(p)) {
			struct sr_cq *c = p;

			if (atomic_fetch_sub(&c->ev_pending, 1) == 1 && atomic_load(&c->zombie) &&
			    atomic_exchange(&c->zombie, false))
				free(c);
		}
	}
	close(ch->ibv.fd);
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
	pthread_mutex_init(&cq->lock, NULL);
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
	/* an earlier "any" request is not weakened by a solicited-only one */
	if (cq->armed != 1)
		cq->armed = solicited_only ? 2 : 1;
	pthread_mutex_unlock(&cq->lock);
	sr_net_stop_polling();
	return 0;
}

SR_EXPORT int ibv_get_cq_event(struct ibv_comp_channel *ibch, struct ibv_cq **cq, void **cq_context)
{
	struct sr_comp_channel *ch = (struct sr_comp_channel *)ibch;
	struct sr_cq *c;
	void *p;
	ssize_t n;
	bool live;

	if (!ibch || ch->magic != SR_MAGIC_CH || !cq || !cq_context) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		n = read(ibch->fd, &p, sizeof(p));
		if (n != sizeof(p)) {
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
		if (live)
			break;
	}
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
