/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requester: turns send WQEs into request messages, in order, one PSN each.
 * Runs in the thread that posts (no hop to another thread) and, after an RNR
 * wait, in the progress thread.
 */
#include "sr.h"

static uint8_t wire_op(enum ibv_wr_opcode op, uint8_t *flags)
{
	switch (op) {
	case IBV_WR_SEND_WITH_IMM:
		*flags |= SR_F_IMM;
		return SR_OP_SEND;
	case IBV_WR_SEND_WITH_INV:
		*flags |= SR_F_INV;
		return SR_OP_SEND;
	case IBV_WR_SEND:
		return SR_OP_SEND;
	case IBV_WR_RDMA_WRITE_WITH_IMM:
		*flags |= SR_F_IMM;
		return SR_OP_WRITE;
	case IBV_WR_RDMA_WRITE:
		return SR_OP_WRITE;
	case IBV_WR_RDMA_READ:
		return SR_OP_READ;
	case IBV_WR_ATOMIC_CMP_AND_SWP:
		return SR_OP_CMP_SWP;
	default:
		return SR_OP_FETCH_ADD;
	}
}

/*
 * A local operation (BIND_MW, LOCAL_INV) is executed when the requester
 * reaches it, in send queue order, and sends nothing; qp->lock held. It
 * completes in order: at once when nothing is outstanding before it, else
 * when the response to the request before it arrives (its PSN is that
 * request's, so a coalesced ACK covers it). A retry (go back N) skips the
 * operations already executed. Returns false when it failed.
 */
static bool local_op(struct sr_qp *qp, struct sr_swqe *w)
{
	int st = IBV_WC_SUCCESS;

	if (!w->local_done) {
		if (w->opcode == IBV_WR_BIND_MW)
			st = sr_mw_bind(qp, w);
		else if (sr_mw_invalidate(qp, w->rkey, false))
			st = IBV_WC_LOC_QP_OP_ERR; /* as rxe */
	}
	qp->sq_next++;
	if (st != IBV_WC_SUCCESS) {
		/* IBA 10.7.3.1: completes in error, in order after those ahead of it */
		w->local_err = (uint8_t)st;
		if (qp->sq_head + 1 == qp->sq_next) {
			sr_qp_complete_send(qp, st);
			sr_qp_error(qp);
		}
		return false;
	}
	w->local_done = 1;
	w->psn = (qp->next_psn - 1) & 0xffffff;
	if (qp->sq_head + 1 == qp->sq_next)
		sr_qp_complete_send(qp, IBV_WC_SUCCESS);
	return true;
}

/* a chained post goes out in one system call: up to this many messages */
#define BATCH_MSGS 32
#define BATCH_IOV  (BATCH_MSGS + 4 * SR_MAX_SGE)

void sr_req_progress(struct sr_qp *qp)
{
	struct iovec iov[SR_MAX_SGE];
	struct sr_hdr hdrs[BATCH_MSGS];
	struct iovec batch[BATCH_IOV];
	int nmsg = 0, nvec = 0;
	bool local, peer_gone = false;

	pthread_mutex_lock(&qp->send_lock);
	pthread_rwlock_rdlock(&sr_mr_lock);
	local = sr_net_is_local(qp);
	for (;;) {
		struct sr_hdr h = { .magic = SR_WIRE_MAGIC };
		struct sr_swqe *w;
		int iovcnt = 0, st = IBV_WC_SUCCESS;

		pthread_mutex_lock(&qp->lock);
		/* IBA 10.3.1: only RTS starts new WQEs (SQD drains, ERR flushes) */
		if (qp->magic != SR_MAGIC_QP || qp->ibv.state != IBV_QPS_RTS || qp->rnr_wait ||
		    qp->sq_next == qp->sq_tail) {
			pthread_mutex_unlock(&qp->lock);
			break;
		}
		w = &qp->sq[qp->sq_next % qp->sq_size];
		w->local_err = 0; /* a retry looks at the local buffers again */
		if (w->opcode == IBV_WR_BIND_MW || w->opcode == IBV_WR_LOCAL_INV) {
			bool ok = local_op(qp, w);

			pthread_mutex_unlock(&qp->lock);
			if (!ok)
				break;
			continue;
		}
		h.op = wire_op(w->opcode, &h.flags);
		if (w->send_flags & IBV_SEND_SOLICITED)
			h.flags |= SR_F_SOLICITED;
		h.src_qpn = qp->ibv.qp_num;
		h.dst_qpn = qp->attr.dest_qp_num;
		h.imm = w->imm_data;
		h.rkey = w->rkey;
		h.raddr = w->remote_addr;
		h.len = w->length;
		h.cmp_add = w->compare_add;
		h.swap = w->swap;
		if (w->inline_used) {
			iov[0].iov_base = w->inl;
			iov[0].iov_len = w->length;
			iovcnt = w->length ? 1 : 0;
		} else {
			/* READ and atomics scatter into local memory: check it now, it is an error either way */
			bool into_local = h.op == SR_OP_READ || h.op == SR_OP_CMP_SWP ||
					  h.op == SR_OP_FETCH_ADD;
			st = sr_mr_sge_to_iov(qp->pd, w->sge, w->num_sge, into_local, iov, &iovcnt);
			if (into_local)
				iovcnt = 0;
		}
		if (st != IBV_WC_SUCCESS) {
			/* IBA 10.7.3.1: the WQE completes in error, in order after those ahead of it */
			w->local_err = (uint8_t)st;
			qp->sq_next++;
			if (qp->sq_head + 1 == qp->sq_next) {
				sr_qp_complete_send(qp, st);
				sr_qp_error(qp);
			}
			pthread_mutex_unlock(&qp->lock);
			break;
		}
		if (qp->sq_head == qp->sq_next)
			qp->last_progress_ns = sr_now_ns();
		qp->sq_next++;
		w->psn = qp->next_psn;
		h.psn = w->psn;
		qp->next_psn = (qp->next_psn + 1) & 0xffffff;
		pthread_mutex_unlock(&qp->lock);
		sr_hwc_add(SR_HWC_SENT_PKTS, 1);

		if (local) {
			/* same process: the responder runs right here */
			sr_net_send(qp, &h, iov, iovcnt);
			continue;
		}
		if (nmsg == BATCH_MSGS || nvec + 1 + iovcnt > BATCH_IOV) {
			peer_gone = sr_net_send_batch(qp, batch, nvec) != 0;
			nmsg = nvec = 0;
			if (peer_gone)
				break;
		}
		hdrs[nmsg] = h;
		batch[nvec].iov_base = &hdrs[nmsg];
		batch[nvec].iov_len = sizeof(h);
		nvec++;
		nmsg++;
		for (int i = 0; i < iovcnt; i++)
			batch[nvec++] = iov[i];
	}
	if (nmsg && !peer_gone)
		peer_gone = sr_net_send_batch(qp, batch, nvec) != 0;
	pthread_rwlock_unlock(&sr_mr_lock);
	pthread_mutex_unlock(&qp->send_lock);
	if (peer_gone) {
		sr_hwc_add(SR_HWC_SEND_ERR, 1);
		sr_comp_peer_lost(qp);
	}
}
