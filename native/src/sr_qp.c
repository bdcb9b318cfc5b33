/* SPDX-License-Identifier: Apache-2.0 */
/* Queue pairs, shared receive queues, the QP state machine, posting. */
#include "sr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- QP number table ----------------------------------------------------- */
static struct sr_qp *qp_table[1 << SR_QPN_INDEX_BITS];
static uint32_t qp_hint = 1;
static uint32_t qp_max_index;
/* read on every incoming request, written when a QP comes or goes */
static pthread_rwlock_t qp_table_lock = PTHREAD_RWLOCK_INITIALIZER;

struct sr_qp *sr_qp_get(uint32_t qpn)
{
	struct sr_qp *qp = NULL;
	uint32_t idx = qpn & ((1u << SR_QPN_INDEX_BITS) - 1);

	if ((qpn >> SR_QPN_INDEX_BITS) != sr_net_instance())
		return NULL;
	pthread_rwlock_rdlock(&qp_table_lock);
	if (qp_table[idx] && qp_table[idx]->ibv.qp_num == qpn) {
		qp = qp_table[idx];
		atomic_fetch_add(&qp->refs, 1);
	}
	pthread_rwlock_unlock(&qp_table_lock);
	return qp;
}

static void qp_free(struct sr_qp *qp)
{
	pthread_mutex_destroy(&qp->lock);
	pthread_mutex_destroy(&qp->send_lock);
	free(qp->sq);
	free(qp->sq_sges);
	free(qp->sq_inline);
	free(qp->rq.ring);
	free(qp->rq.sges);
	free(qp);
}

void sr_qp_put(struct sr_qp *qp)
{
	if (atomic_fetch_sub(&qp->refs, 1) == 1)
		qp_free(qp);
}

void sr_qp_foreach(void (*fn)(struct sr_qp *qp, void *arg), void *arg)
{
	for (uint32_t i = 1; i <= qp_max_index; i++) {
		struct sr_qp *qp;

		pthread_rwlock_rdlock(&qp_table_lock);
		qp = qp_table[i];
		if (qp)
			atomic_fetch_add(&qp->refs, 1);
		pthread_rwlock_unlock(&qp_table_lock);
		if (qp) {
			fn(qp, arg);
			sr_qp_put(qp);
		}
	}
}

static bool is_qp(struct ibv_qp *qp)
{
	return qp && ((struct sr_qp *)qp)->magic == SR_MAGIC_QP;
}

/* ---- receive queues (QP's own or SRQ) ----------------------------------- */
static int rq_init(struct sr_rq *rq, uint32_t wr, uint32_t sge)
{
	rq->size = wr ? wr : 1;
	rq->max_sge = sge ? sge : 1;
	rq->ring = calloc(rq->size, sizeof(*rq->ring));
	rq->sges = calloc((size_t)rq->size * rq->max_sge, sizeof(*rq->sges));
	if (!rq->ring || !rq->sges)
		return ENOMEM;
	for (uint32_t i = 0; i < rq->size; i++)
		rq->ring[i].sge = &rq->sges[(size_t)i * rq->max_sge];
	return 0;
}

static int rq_post(struct sr_rq *rq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	for (; wr; wr = wr->next) {
		struct sr_rwqe *r;

		if (wr->num_sge < 0 || (uint32_t)wr->num_sge > rq->max_sge || (wr->num_sge && !wr->sg_list)) {
			*bad = wr;
			return EINVAL;
		}
		if (rq->count == rq->size) {
			*bad = wr;
			return ENOMEM;
		}
		r = &rq->ring[(rq->head + rq->count) % rq->size];
		r->wr_id = wr->wr_id;
		r->num_sge = (uint32_t)wr->num_sge;
		if (r->num_sge)
			memcpy(r->sge, wr->sg_list, sizeof(*r->sge) * r->num_sge);
		rq->count++;
	}
	return 0;
}

static bool rq_take(struct sr_rq *rq, struct sr_rwqe *out, struct ibv_sge *sge_out)
{
	struct sr_rwqe *r;

	if (!rq->count)
		return false;
	r = &rq->ring[rq->head];
	out->wr_id = r->wr_id;
	out->num_sge = r->num_sge;
	out->sge = sge_out;
	if (r->num_sge)
		memcpy(sge_out, r->sge, sizeof(*sge_out) * r->num_sge);
	rq->head = (rq->head + 1) % rq->size;
	rq->count--;
	return true;
}

/* qp->lock held; sge_out has room for SR_MAX_SGE entries */
bool sr_rq_pop(struct sr_qp *qp, struct sr_rwqe *out, struct ibv_sge *sge_out)
{
	struct sr_srq *srq = qp->srq;
	bool ok, limit = false;

	if (!srq)
		return rq_take(&qp->rq, out, sge_out);
	pthread_mutex_lock(&srq->lock);
	ok = rq_take(&srq->rq, out, sge_out);
	/* IBA 10.2.9.5: the SRQ limit event fires once when the WQE count drops below the limit */
	if (ok && srq->limit && srq->rq.count < srq->limit) {
		srq->limit = 0;
		limit = true;
	}
	pthread_mutex_unlock(&srq->lock);
	if (limit)
		sr_async_event(srq->ibv.context, IBV_EVENT_SRQ_LIMIT_REACHED, &srq->ibv);
	return ok;
}

/* ---- completions --------------------------------------------------------- */
static enum ibv_wc_opcode send_wc_opcode(enum ibv_wr_opcode op)
{
	switch (op) {
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		return IBV_WC_RDMA_WRITE;
	case IBV_WR_RDMA_READ:
		return IBV_WC_RDMA_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return IBV_WC_COMP_SWAP;
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		return IBV_WC_FETCH_ADD;
	case IBV_WR_BIND_MW:
		return IBV_WC_BIND_MW;
	case IBV_WR_LOCAL_INV:
		return IBV_WC_LOCAL_INV;
	default:
		return IBV_WC_SEND;
	}
}

/*
 * Complete the oldest send WQE; qp->lock held.
 * IBA 10.7.3.1: an unsignaled WR produces no CQE on success, but a completion
 * error always generates a CQE, even if unsignaled.
 */
void sr_qp_complete_send(struct sr_qp *qp, enum ibv_wc_status st)
{
	struct sr_swqe *w = &qp->sq[qp->sq_head % qp->sq_size];

	if (st != IBV_WC_SUCCESS || qp->sq_sig_all || (w->send_flags & IBV_SEND_SIGNALED)) {
		struct ibv_wc wc = {
			.wr_id = w->wr_id,
			.status = st,
			.opcode = send_wc_opcode(w->opcode),
			.byte_len = (uint32_t)w->length,
			.qp_num = qp->ibv.qp_num,
			.src_qp = qp->attr.dest_qp_num,
		};
		if (st != IBV_WC_SUCCESS)
			sr_dbg("qp 0x%x: send wr_id %llu completes with \"%s\"", qp->ibv.qp_num,
			       (unsigned long long)w->wr_id, ibv_wc_status_str(st));
		sr_cq_push(qp->scq, &wc, false);
	}
	qp->sq_head++;
	if (qp->sq_next < qp->sq_head)
		qp->sq_next = qp->sq_head;
	qp->rnr_left = qp->attr.rnr_retry;
	qp->retry_left = qp->attr.retry_cnt;
}

static void flush_recv(struct sr_qp *qp, uint64_t wr_id)
{
	struct ibv_wc wc = {
		.wr_id = wr_id,
		.status = IBV_WC_WR_FLUSH_ERR,
		.opcode = IBV_WC_RECV,
		.qp_num = qp->ibv.qp_num,
	};
	sr_cq_push(qp->rcq, &wc, false);
}

/*
 * Move to ERR and flush; qp->lock held. IBA 10.3.1: in the error state all
 * outstanding and newly posted WRs complete with "flushed" status.
 */
void sr_qp_error(struct sr_qp *qp)
{
	struct sr_rwqe r;
	struct ibv_sge sge[SR_MAX_SGE];
	bool was_err = qp->ibv.state == IBV_QPS_ERR;

	if (!was_err)
		sr_dbg("qp 0x%x: %s -> ERR", qp->ibv.qp_num, sr_qp_state_name(qp->ibv.state));
	qp->ibv.state = IBV_QPS_ERR;
	qp->attr.qp_state = IBV_QPS_ERR;
	qp->rnr_wait = false;
	qp->timer_deadline_ns = 0;
	while (qp->sq_head != qp->sq_tail)
		sr_qp_complete_send(qp, IBV_WC_WR_FLUSH_ERR);
	if (!qp->srq) {
		while (rq_take(&qp->rq, &r, sge))
			flush_recv(qp, r.wr_id);
	} else if (!was_err) {
		/* IBA 11.6.3: a QP on an SRQ reports Last WQE Reached when it enters ERR */
		sr_async_event(qp->ibv.context, IBV_EVENT_QP_LAST_WQE_REACHED, &qp->ibv);
	}
}

/* ---- create / destroy ---------------------------------------------------- */
SR_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *ibpd, struct ibv_qp_init_attr *init)
{
	struct sr_pd *pd = (struct sr_pd *)ibpd;
	struct sr_qp *qp;
	struct ibv_qp_cap cap;
	uint32_t idx = 0;

	if (!ibpd || pd->magic != SR_MAGIC_PD || !init) {
		errno = EINVAL;
		return NULL;
	}
	if (init->qp_type != IBV_QPT_RC) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	cap = init->cap;
	if (!init->send_cq || ((struct sr_cq *)init->send_cq)->magic != SR_MAGIC_CQ ||
	    !init->recv_cq || ((struct sr_cq *)init->recv_cq)->magic != SR_MAGIC_CQ ||
	    (init->srq && ((struct sr_srq *)init->srq)->magic != SR_MAGIC_SRQ) ||
	    cap.max_send_wr > SR_MAX_QP_WR || cap.max_send_sge > SR_MAX_SGE ||
	    cap.max_inline_data > SR_MAX_INLINE ||
	    (!init->srq && (cap.max_recv_wr > SR_MAX_QP_WR || cap.max_recv_sge > SR_MAX_SGE))) {
		errno = EINVAL;
		return NULL;
	}
	qp = calloc(1, sizeof(*qp));
	if (!qp) {
		errno = ENOMEM;
		return NULL;
	}
	/* grant at least what was asked for and write it back, as rdma-core does */
	if (!cap.max_send_wr)
		cap.max_send_wr = 1;
	if (!cap.max_send_sge)
		cap.max_send_sge = 1;
	cap.max_inline_data = SR_MAX_INLINE;
	if (init->srq) {
		cap.max_recv_wr = 0;
		cap.max_recv_sge = 0;
	} else {
		if (!cap.max_recv_wr)
			cap.max_recv_wr = 1;
		if (!cap.max_recv_sge)
			cap.max_recv_sge = 1;
	}
	qp->sq_size = cap.max_send_wr;
	qp->sq = calloc(qp->sq_size, sizeof(*qp->sq));
	/* Not zeroed: a WQE's SGEs are copied in when it is posted and only its num_sge are read. Untouched, the
	 * room for max_send_sge SGEs per WQE costs an idle QP no resident memory, as on hardware where it fits the
	 * WQE size that inline data set anyway. */
	qp->sq_sges = malloc((size_t)qp->sq_size * cap.max_send_sge * sizeof(*qp->sq_sges));
	qp->sq_inline = malloc((size_t)qp->sq_size * SR_MAX_INLINE);
	if (!qp->sq || !qp->sq_sges || !qp->sq_inline ||
	    (!init->srq && rq_init(&qp->rq, cap.max_recv_wr, cap.max_recv_sge))) {
		qp_free(qp);
		errno = ENOMEM;
		return NULL;
	}
	for (uint32_t i = 0; i < qp->sq_size; i++) {
		qp->sq[i].sge = &qp->sq_sges[(size_t)i * cap.max_send_sge];
		qp->sq[i].inl = &qp->sq_inline[(size_t)i * SR_MAX_INLINE];
	}
	/*
	 * Everything another thread may touch (reference count, locks, QPN) is set
	 * before the QP becomes visible in the table: sr_qp_foreach() (progress
	 * thread) takes and drops a reference on every QP it finds there, and
	 * freed a QP whose count was still 0 under its creator.
	 */
	atomic_init(&qp->refs, 1);
	sr_mutex_init(&qp->lock);
	sr_mutex_init(&qp->send_lock);
	qp->ibv.context = ibpd->context;
	qp->ibv.qp_context = init->qp_context;
	qp->ibv.pd = ibpd;
	qp->ibv.send_cq = init->send_cq;
	qp->ibv.recv_cq = init->recv_cq;
	qp->ibv.srq = init->srq;
	qp->ibv.state = IBV_QPS_RESET;
	qp->ibv.qp_type = IBV_QPT_RC;
	pthread_mutex_init(&qp->ibv.mutex, NULL);
	pthread_cond_init(&qp->ibv.cond, NULL);
	qp->pd = pd;
	qp->scq = (struct sr_cq *)init->send_cq;
	qp->rcq = (struct sr_cq *)init->recv_cq;
	qp->srq = (struct sr_srq *)init->srq;
	qp->cap = cap;
	qp->sq_sig_all = init->sq_sig_all;
	qp->attr.qp_state = IBV_QPS_RESET;
	qp->attr.cap = cap;
	qp->attr.path_mtu = IBV_MTU_4096;
	qp->attr.port_num = 1;
	pthread_rwlock_wrlock(&qp_table_lock);
	for (uint32_t n = 1; n < (1u << SR_QPN_INDEX_BITS); n++) {
		uint32_t i = qp_hint++;

		if (qp_hint >= (1u << SR_QPN_INDEX_BITS))
			qp_hint = 1;
		if (!qp_table[i]) {
			idx = i;
			break;
		}
	}
	if (idx) {
		qp->ibv.handle = idx;
		qp->ibv.qp_num = sr_net_instance() << SR_QPN_INDEX_BITS | idx;
		qp_table[idx] = qp;
		if (idx > qp_max_index)
			qp_max_index = idx;
	}
	pthread_rwlock_unlock(&qp_table_lock);
	if (!idx) {
		pthread_mutex_destroy(&qp->ibv.mutex);
		pthread_cond_destroy(&qp->ibv.cond);
		qp_free(qp);
		errno = ENOMEM;
		return NULL;
	}
	atomic_fetch_add(&pd->users, 1);
	atomic_fetch_add(&qp->scq->users, 1);
	atomic_fetch_add(&qp->rcq->users, 1);
	if (qp->srq)
		atomic_fetch_add(&qp->srq->users, 1);
	init->cap = cap;
	qp->magic = SR_MAGIC_QP;
	sr_count(SR_K_QP, 1);
	sr_dbg("create_qp 0x%x sq %u rq %u", qp->ibv.qp_num, cap.max_send_wr, cap.max_recv_wr);
	return &qp->ibv;
}

SR_EXPORT int ibv_destroy_qp(struct ibv_qp *ibqp)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;

	if (!is_qp(ibqp))
		return EINVAL;
	pthread_rwlock_wrlock(&qp_table_lock);
	qp_table[ibqp->handle] = NULL;
	pthread_rwlock_unlock(&qp_table_lock);
	/* wait for a transmission in progress, then make the QP inert */
	pthread_mutex_lock(&qp->send_lock);
	pthread_mutex_lock(&qp->lock);
	qp->magic = SR_MAGIC_DEAD;
	qp->ibv.state = IBV_QPS_RESET;
	qp->timer_deadline_ns = 0;
	pthread_mutex_unlock(&qp->lock);
	pthread_mutex_unlock(&qp->send_lock);
	/* inert: no new async event; unread ones go, returned ones must be acked */
	sr_async_forget(qp->ibv.context, &qp->ibv, &qp->async_reported, &qp->async_acked);
	sr_net_qp_release(qp);
	atomic_fetch_sub(&qp->pd->users, 1);
	atomic_fetch_sub(&qp->scq->users, 1);
	atomic_fetch_sub(&qp->rcq->users, 1);
	if (qp->srq)
		atomic_fetch_sub(&qp->srq->users, 1);
	sr_count(SR_K_QP, -1);
	sr_dbg("destroy_qp 0x%x", ibqp->qp_num);
	sr_qp_put(qp);
	return 0;
}

SR_EXPORT struct ibv_qp_ex *ibv_qp_to_qp_ex(struct ibv_qp *qp)
{
	(void)qp;
	errno = EOPNOTSUPP;
	return NULL;
}

/* ---- modify: the state machine (IBA 10.3.1, table as in ib_modify_qp_is_ok) */
struct qp_trans {
	bool valid;
	int req, opt;
};

#define M(x) IBV_QP_##x
static const struct qp_trans qp_trans_rc[IBV_QPS_ERR + 1][IBV_QPS_ERR + 1] = {
	[IBV_QPS_RESET] = {
		[IBV_QPS_RESET] = { true, 0, 0 },
		[IBV_QPS_INIT] = { true, M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS), 0 },
	},
	[IBV_QPS_INIT] = {
		[IBV_QPS_INIT] = { true, 0, M(PKEY_INDEX) | M(PORT) | M(ACCESS_FLAGS) },
		[IBV_QPS_RTR] = { true,
			M(AV) | M(PATH_MTU) | M(DEST_QPN) | M(RQ_PSN) | M(MAX_DEST_RD_ATOMIC) |
			M(MIN_RNR_TIMER),
			M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) },
	},
	[IBV_QPS_RTR] = {
		[IBV_QPS_RTS] = { true,
			M(SQ_PSN) | M(MAX_QP_RD_ATOMIC) | M(RETRY_CNT) | M(RNR_RETRY) | M(TIMEOUT),
			M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(MIN_RNR_TIMER) |
			M(PATH_MIG_STATE) },
	},
	[IBV_QPS_RTS] = {
		[IBV_QPS_RTS] = { true, 0, M(CUR_STATE) | M(ACCESS_FLAGS) | M(ALT_PATH) |
			M(PATH_MIG_STATE) | M(MIN_RNR_TIMER) },
		[IBV_QPS_SQD] = { true, 0, M(EN_SQD_ASYNC_NOTIFY) },
	},
	[IBV_QPS_SQD] = {
		[IBV_QPS_RTS] = { true, 0, M(CUR_STATE) | M(ALT_PATH) | M(ACCESS_FLAGS) |
			M(MIN_RNR_TIMER) | M(PATH_MIG_STATE) },
		[IBV_QPS_SQD] = { true, 0, M(AV) | M(ALT_PATH) | M(ACCESS_FLAGS) | M(PKEY_INDEX) |
			M(MIN_RNR_TIMER) | M(PATH_MIG_STATE) | M(TIMEOUT) | M(RETRY_CNT) |
			M(RNR_RETRY) | M(MAX_QP_RD_ATOMIC) | M(MAX_DEST_RD_ATOMIC) },
	},
	[IBV_QPS_SQE] = {
		[IBV_QPS_RTS] = { true, 0, M(CUR_STATE) | M(ACCESS_FLAGS) },
	},
};

static bool modify_ok(enum ibv_qp_state cur, enum ibv_qp_state next, int mask)
{
	const struct qp_trans *t;

	/* any state may go to RESET; any but RESET to ERR */
	if (next == IBV_QPS_RESET || (next == IBV_QPS_ERR && cur != IBV_QPS_RESET))
		return !(mask & ~(M(STATE) | M(CUR_STATE)));
	if (cur > IBV_QPS_ERR || next > IBV_QPS_ERR)
		return false;
	t = &qp_trans_rc[cur][next];
	if (!t->valid)
		return false;
	if ((mask & t->req) != t->req)
		return false;
	return !(mask & ~(t->req | t->opt | M(STATE)));
}

static int check_values(struct sr_qp *qp, struct ibv_qp_attr *a, int mask)
{
	if ((mask & M(PORT)) && a->port_num != 1)
		return EINVAL;
	if ((mask & M(PKEY_INDEX)) && a->pkey_index != 0)
		return EINVAL;
	if ((mask & M(PATH_MTU)) && (a->path_mtu < IBV_MTU_256 || a->path_mtu > IBV_MTU_4096))
		return EINVAL;
	if ((mask & M(MAX_QP_RD_ATOMIC)) && a->max_rd_atomic > SR_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & M(MAX_DEST_RD_ATOMIC)) && a->max_dest_rd_atomic > SR_MAX_RD_ATOM)
		return EINVAL;
	if ((mask & M(RETRY_CNT)) && a->retry_cnt > 7)
		return EINVAL;
	if ((mask & M(RNR_RETRY)) && a->rnr_retry > 7)
		return EINVAL;
	if ((mask & M(TIMEOUT)) && a->timeout > 31)
		return EINVAL;
	if ((mask & M(MIN_RNR_TIMER)) && a->min_rnr_timer > 31)
		return EINVAL;
	if ((mask & M(CAP)))
		return EINVAL;
	/* RoCE carries a GRH on every packet: an address without one cannot be routed */
	if ((mask & M(AV)) && (!a->ah_attr.is_global || a->ah_attr.port_num > 1))
		return EINVAL;
	if ((mask & M(AV)) && a->ah_attr.grh.sgid_index >= sr_gid_count(sr_dev_index(qp->ibv.context->device)))
		return EINVAL;
	(void)qp;
	return 0;
}

SR_EXPORT int ibv_modify_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	enum ibv_qp_state cur, next;
	int err;
	bool to_rtr = false;

	if (!is_qp(ibqp) || !a)
		return EINVAL;
	pthread_mutex_lock(&qp->lock);
	cur = qp->ibv.state;
	if ((mask & M(CUR_STATE)) && a->cur_qp_state != cur) {
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	next = (mask & M(STATE)) ? a->qp_state : cur;
	if (!modify_ok(cur, next, mask)) {
		sr_dbg("qp 0x%x: modify %s -> %s with mask 0x%x refused", ibqp->qp_num,
		       sr_qp_state_name(cur), sr_qp_state_name(next), mask);
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	err = check_values(qp, a, mask);
	if (err) {
		pthread_mutex_unlock(&qp->lock);
		return err;
	}
	if (mask & M(PKEY_INDEX))
		qp->attr.pkey_index = a->pkey_index;
	if (mask & M(PORT))
		qp->attr.port_num = a->port_num;
	if (mask & M(ACCESS_FLAGS))
		qp->attr.qp_access_flags = a->qp_access_flags;
	if (mask & M(AV))
		qp->attr.ah_attr = a->ah_attr;
	if (mask & M(PATH_MTU))
		qp->attr.path_mtu = a->path_mtu;
	if (mask & M(DEST_QPN))
		qp->attr.dest_qp_num = a->dest_qp_num;
	if (mask & M(RQ_PSN)) {
		qp->attr.rq_psn = a->rq_psn & 0xffffff;
		qp->epsn = qp->attr.rq_psn;
	}
	if (mask & M(SQ_PSN)) {
		qp->attr.sq_psn = a->sq_psn & 0xffffff;
		qp->next_psn = qp->attr.sq_psn;
	}
	if (mask & M(MAX_DEST_RD_ATOMIC))
		qp->attr.max_dest_rd_atomic = a->max_dest_rd_atomic;
	if (mask & M(MAX_QP_RD_ATOMIC))
		qp->attr.max_rd_atomic = a->max_rd_atomic;
	if (mask & M(MIN_RNR_TIMER))
		qp->attr.min_rnr_timer = a->min_rnr_timer;
	if (mask & M(TIMEOUT))
		qp->attr.timeout = a->timeout;
	if (mask & M(RETRY_CNT)) {
		qp->attr.retry_cnt = a->retry_cnt;
		qp->retry_left = a->retry_cnt;
	}
	if (mask & M(RNR_RETRY)) {
		qp->attr.rnr_retry = a->rnr_retry;
		qp->rnr_left = a->rnr_retry;
	}
	if (mask & M(EN_SQD_ASYNC_NOTIFY))
		qp->attr.en_sqd_async_notify = a->en_sqd_async_notify;
	if (next != cur)
		sr_dbg("qp 0x%x: %s -> %s", ibqp->qp_num, sr_qp_state_name(cur), sr_qp_state_name(next));
	switch (next) {
	case IBV_QPS_RESET: {
		struct sr_rwqe r;
		struct ibv_sge sge[SR_MAX_SGE];

		/* IBA 10.3.1: RESET discards all WQEs without completions */
		qp->sq_head = qp->sq_next = qp->sq_tail = 0;
		if (!qp->srq)
			while (rq_take(&qp->rq, &r, sge))
				;
		qp->rnr_wait = false;
		qp->timer_deadline_ns = 0;
		qp->ibv.state = next;
		qp->attr.qp_state = next;
		break;
	}
	case IBV_QPS_ERR:
		sr_qp_error(qp);
		break;
	default:
		to_rtr = next == IBV_QPS_RTR && cur == IBV_QPS_INIT;
		qp->ibv.state = next;
		qp->attr.qp_state = next;
		break;
	}
	pthread_mutex_unlock(&qp->lock);
	if (to_rtr)
		sr_net_qp_connect(qp);
	if (next == IBV_QPS_RTS)
		sr_req_progress(qp);
	return 0;
}

SR_EXPORT int ibv_query_qp(struct ibv_qp *ibqp, struct ibv_qp_attr *a, int mask,
			   struct ibv_qp_init_attr *init)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;

	(void)mask;
	if (!is_qp(ibqp) || !a || !init)
		return EINVAL;
	pthread_mutex_lock(&qp->lock);
	*a = qp->attr;
	a->qp_state = qp->ibv.state;
	a->cur_qp_state = qp->ibv.state;
	a->sq_psn = qp->next_psn;
	a->rq_psn = qp->epsn;
	a->cap = qp->cap;
	memset(init, 0, sizeof(*init));
	init->qp_context = ibqp->qp_context;
	init->send_cq = ibqp->send_cq;
	init->recv_cq = ibqp->recv_cq;
	init->srq = ibqp->srq;
	init->cap = qp->cap;
	init->qp_type = IBV_QPT_RC;
	init->sq_sig_all = qp->sq_sig_all;
	pthread_mutex_unlock(&qp->lock);
	return 0;
}

SR_EXPORT int ibv_query_qp_data_in_order(struct ibv_qp *qp, enum ibv_wr_opcode op, uint32_t flags)
{
	(void)qp; (void)op; (void)flags;
	/* data lands in order: memcpy or one TCP stream per peer */
	return 1;
}

/* ---- posting ------------------------------------------------------------- */
static int check_send_wr(struct sr_qp *qp, struct ibv_send_wr *wr, uint64_t *len)
{
	uint64_t total = 0;

	if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->cap.max_send_sge ||
	    (wr->num_sge && !wr->sg_list))
		return EINVAL;
	switch (wr->opcode) {
	case IBV_WR_BIND_MW: {
		const struct ibv_mw_bind_info *b = &wr->bind_mw.bind_info;

		/* local operations carry no data: the SGE list is ignored */
		if (!wr->bind_mw.mw || ((struct sr_mw *)wr->bind_mw.mw)->magic != SR_MAGIC_MW ||
		    (b->length && !b->mr))
			return EINVAL;
		*len = 0;
		return 0;
	}
	case IBV_WR_LOCAL_INV:
		*len = 0;
		return 0;
	case IBV_WR_SEND:
	case IBV_WR_SEND_WITH_IMM:
	case IBV_WR_SEND_WITH_INV:
	case IBV_WR_RDMA_WRITE:
	case IBV_WR_RDMA_WRITE_WITH_IMM:
	case IBV_WR_RDMA_READ:
		break;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
	case IBV_WR_ATOMIC_FETCH_AND_ADD:
		if (wr->num_sge != 1 || wr->sg_list[0].length < 8)
			return EINVAL;
		break;
	default:
		return EINVAL;
	}
	for (int i = 0; i < wr->num_sge; i++)
		total += wr->sg_list[i].length;
	if (total > SR_MAX_MSG_SZ)
		return EINVAL;
	if (wr->send_flags & IBV_SEND_INLINE) {
		if (total > SR_MAX_INLINE || wr->opcode == IBV_WR_RDMA_READ ||
		    wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP || wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
			return EINVAL;
	}
	*len = total;
	return 0;
}

static void flush_send_now(struct sr_qp *qp, struct ibv_send_wr *wr)
{
	struct ibv_wc wc = {
		.wr_id = wr->wr_id,
		.status = IBV_WC_WR_FLUSH_ERR,
		.opcode = send_wc_opcode(wr->opcode),
		.qp_num = qp->ibv.qp_num,
	};
	sr_cq_push(qp->scq, &wc, false);
}

int sr_qp_post_send(struct ibv_qp *ibqp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct ibv_send_wr *dummy;
	int err = 0;

	if (!bad)
		bad = &dummy;
	if (!is_qp(ibqp)) {
		*bad = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&qp->lock);
	/* rxe (and the kernel) reject sends before RTS */
	if (qp->ibv.state < IBV_QPS_RTS) {
		*bad = wr;
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	for (; wr; wr = wr->next) {
		struct sr_swqe *w;
		uint64_t len;

		err = check_send_wr(qp, wr, &len);
		if (err)
			break;
		if (qp->ibv.state == IBV_QPS_ERR) {
			flush_send_now(qp, wr);
			continue;
		}
		if (qp->sq_tail - qp->sq_head == qp->sq_size) {
			err = ENOMEM;
			break;
		}
		w = &qp->sq[qp->sq_tail % qp->sq_size];
		w->wr_id = wr->wr_id;
		w->opcode = wr->opcode;
		w->send_flags = wr->send_flags;
		w->imm_data = wr->imm_data;
		w->num_sge = (uint32_t)wr->num_sge;
		w->length = len;
		w->local_err = 0;
		w->local_done = 0;
		w->inline_used = 0;
		if (wr->opcode == IBV_WR_BIND_MW) {
			const struct ibv_mw_bind_info *b = &wr->bind_mw.bind_info;

			/* as rxe: the window and the MR are named by their keys as they are now */
			w->mw_rkey = wr->bind_mw.mw->rkey;
			w->mr_lkey = b->mr ? b->mr->lkey : 0;
			w->rkey = wr->bind_mw.rkey;
			w->mw_addr = b->addr;
			w->mw_length = b->length;
			w->mw_access = (int)b->mw_access_flags;
			w->num_sge = 0;
			qp->sq_tail++;
			continue;
		}
		if (wr->opcode == IBV_WR_LOCAL_INV || wr->opcode == IBV_WR_SEND_WITH_INV) {
			w->rkey = wr->invalidate_rkey;
			w->imm_data = 0;
			if (wr->opcode == IBV_WR_LOCAL_INV) {
				w->num_sge = 0;
				qp->sq_tail++;
				continue;
			}
		} else if (wr->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			   wr->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD) {
			w->remote_addr = wr->wr.atomic.remote_addr;
			w->rkey = wr->wr.atomic.rkey;
			w->compare_add = wr->wr.atomic.compare_add;
			w->swap = wr->wr.atomic.swap;
			w->length = 8;
		} else {
			w->remote_addr = wr->wr.rdma.remote_addr;
			w->rkey = wr->wr.rdma.rkey;
		}
		if (wr->send_flags & IBV_SEND_INLINE) {
			/* copied now: the caller may reuse the buffer at once; lkey is ignored */
			uint8_t *p = w->inl;

			for (int i = 0; i < wr->num_sge; i++) {
				if (!wr->sg_list[i].length)
					continue;
				memcpy(p, (void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
				p += wr->sg_list[i].length;
			}
			w->inline_used = 1;
			w->num_sge = 0;
		} else if (w->num_sge) {
			memcpy(w->sge, wr->sg_list, sizeof(*w->sge) * w->num_sge);
		}
		qp->sq_tail++;
	}
	if (err)
		*bad = wr;
	pthread_mutex_unlock(&qp->lock);
	sr_req_progress(qp);
	return err;
}

int sr_qp_post_recv(struct ibv_qp *ibqp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sr_qp *qp = (struct sr_qp *)ibqp;
	struct ibv_recv_wr *dummy;
	int err;

	if (!bad)
		bad = &dummy;
	if (!is_qp(ibqp) || qp->srq) {
		*bad = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&qp->lock);
	if (qp->ibv.state == IBV_QPS_RESET) {
		*bad = wr;
		pthread_mutex_unlock(&qp->lock);
		return EINVAL;
	}
	if (qp->ibv.state == IBV_QPS_ERR) {
		err = 0;
		for (; wr; wr = wr->next) {
			if (wr->num_sge < 0 || (uint32_t)wr->num_sge > qp->rq.max_sge) {
				*bad = wr;
				err = EINVAL;
				break;
			}
			flush_recv(qp, wr->wr_id);
		}
	} else {
		err = rq_post(&qp->rq, wr, bad);
	}
	pthread_mutex_unlock(&qp->lock);
	return err;
}

/* ---- SRQ ----------------------------------------------------------------- */
SR_EXPORT struct ibv_srq *ibv_create_srq(struct ibv_pd *ibpd, struct ibv_srq_init_attr *init)
{
	struct sr_pd *pd = (struct sr_pd *)ibpd;
	struct sr_srq *srq;

	if (!ibpd || pd->magic != SR_MAGIC_PD || !init || init->attr.max_wr > SR_MAX_SRQ_WR ||
	    init->attr.max_sge > SR_MAX_SRQ_SGE || init->attr.srq_limit > init->attr.max_wr) {
		errno = EINVAL;
		return NULL;
	}
	srq = calloc(1, sizeof(*srq));
	if (!srq || rq_init(&srq->rq, init->attr.max_wr, init->attr.max_sge)) {
		if (srq) {
			free(srq->rq.ring);
			free(srq->rq.sges);
		}
		free(srq);
		errno = ENOMEM;
		return NULL;
	}
	sr_mutex_init(&srq->lock);
	srq->ibv.context = ibpd->context;
	srq->ibv.srq_context = init->srq_context;
	srq->ibv.pd = ibpd;
	pthread_mutex_init(&srq->ibv.mutex, NULL);
	pthread_cond_init(&srq->ibv.cond, NULL);
	srq->pd = pd;
	srq->limit = init->attr.srq_limit;
	init->attr.max_wr = srq->rq.size;
	init->attr.max_sge = srq->rq.max_sge;
	atomic_fetch_add(&pd->users, 1);
	srq->magic = SR_MAGIC_SRQ;
	sr_count(SR_K_SRQ, 1);
	return &srq->ibv;
}

SR_EXPORT int ibv_destroy_srq(struct ibv_srq *ibsrq)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;

	if (!ibsrq || srq->magic != SR_MAGIC_SRQ)
		return EINVAL;
	if (atomic_load(&srq->users))
		return EBUSY;
	/* no QP left to raise its limit event: unread ones go, returned ones must be acked */
	sr_async_forget(srq->ibv.context, &srq->ibv, &srq->async_reported, &srq->async_acked);
	srq->magic = SR_MAGIC_DEAD;
	atomic_fetch_sub(&srq->pd->users, 1);
	pthread_mutex_destroy(&srq->lock);
	free(srq->rq.ring);
	free(srq->rq.sges);
	sr_count(SR_K_SRQ, -1);
	free(srq);
	return 0;
}

SR_EXPORT int ibv_modify_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr, int mask)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;
	int err = 0;

	if (!ibsrq || srq->magic != SR_MAGIC_SRQ || !attr)
		return EINVAL;
	pthread_mutex_lock(&srq->lock);
	if (mask & IBV_SRQ_MAX_WR)
		err = EINVAL; /* resizing is not supported */
	else if ((mask & IBV_SRQ_LIMIT) && attr->srq_limit > srq->rq.size)
		err = EINVAL;
	else if (mask & IBV_SRQ_LIMIT)
		srq->limit = attr->srq_limit;
	pthread_mutex_unlock(&srq->lock);
	return err;
}

SR_EXPORT int ibv_query_srq(struct ibv_srq *ibsrq, struct ibv_srq_attr *attr)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;

	if (!ibsrq || srq->magic != SR_MAGIC_SRQ || !attr)
		return EINVAL;
	pthread_mutex_lock(&srq->lock);
	attr->max_wr = srq->rq.size;
	attr->max_sge = srq->rq.max_sge;
	attr->srq_limit = srq->limit;
	pthread_mutex_unlock(&srq->lock);
	return 0;
}

int sr_srq_post_recv(struct ibv_srq *ibsrq, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct sr_srq *srq = (struct sr_srq *)ibsrq;
	struct ibv_recv_wr *dummy;
	int err;

	if (!bad)
		bad = &dummy;
	if (!ibsrq || srq->magic != SR_MAGIC_SRQ) {
		*bad = wr;
		return EINVAL;
	}
	pthread_mutex_lock(&srq->lock);
	err = rq_post(&srq->rq, wr, bad);
	pthread_mutex_unlock(&srq->lock);
	return err;
}
