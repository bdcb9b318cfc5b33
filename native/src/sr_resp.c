/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Responder: executes incoming requests against local MRs and RECV WQEs and
 * answers each with ACK, NAK, RNR NAK, read data or the atomic's old value.
 * Caller holds sr_mr_lock for reading.
 */
#include "sr.h"

#include <string.h>

enum resp_state {
	RESPST_CHECK_QP, RESPST_CHECK_PSN, RESPST_GET_RECV, RESPST_CHECK_RKEY, RESPST_EXECUTE,
	RESPST_ACK, RESPST_RNR_NAK, RESPST_ERR_INV_REQ, RESPST_ERR_ACCESS, RESPST_ERR_LENGTH,
	RESPST_ERR_LOCAL, RESPST_ERR_INVALIDATE, RESPST_DROP, RESPST_NUM
};

static const char *const resp_state_name[RESPST_NUM] = {
	[RESPST_CHECK_QP] = "CHECK_QP", [RESPST_CHECK_PSN] = "CHECK_PSN",
	[RESPST_GET_RECV] = "GET_RECV", [RESPST_CHECK_RKEY] = "CHECK_RKEY",
	[RESPST_EXECUTE] = "EXECUTE", [RESPST_ACK] = "ACK", [RESPST_RNR_NAK] = "RNR_NAK",
	[RESPST_ERR_INV_REQ] = "ERR_INV_REQ", [RESPST_ERR_ACCESS] = "ERR_ACCESS",
	[RESPST_ERR_LENGTH] = "ERR_LENGTH", [RESPST_ERR_LOCAL] = "ERR_LOCAL",
	[RESPST_ERR_INVALIDATE] = "ERR_INVALIDATE", [RESPST_DROP] = "DROP",
};

static void recv_cqe(struct sr_qp *qp, uint64_t wr_id, enum ibv_wc_status st,
		     enum ibv_wc_opcode op, uint32_t len, const struct sr_hdr *h)
{
	struct ibv_wc wc = {
		.wr_id = wr_id,
		.status = st,
		.opcode = op,
		.byte_len = len,
		.qp_num = qp->ibv.qp_num,
		.src_qp = h->src_qpn,
	};
	if (st == IBV_WC_SUCCESS && (h->flags & SR_F_IMM)) {
		wc.imm_data = h->imm;
		wc.wc_flags = IBV_WC_WITH_IMM;
	} else if (st == IBV_WC_SUCCESS && (h->flags & SR_F_INV)) {
		wc.invalidated_rkey = h->rkey;
		wc.wc_flags = IBV_WC_WITH_INV;
	}
	sr_cq_push(qp->rcq, &wc, (h->flags & SR_F_SOLICITED) != 0);
}

static int copy_in(struct sr_src *src, const struct iovec *iov, int n, uint64_t len)
{
	for (int i = 0; i < n && len; i++) {
		size_t c = iov[i].iov_len < len ? iov[i].iov_len : len;

		if (sr_src_copy(src, iov[i].iov_base, c))
			return -1;
		len -= c;
	}
	return 0;
}

void sr_resp_handle(struct sr_conn *from, struct sr_hdr *h, struct sr_src *src)
{
	struct sr_hdr r = { .magic = SR_WIRE_MAGIC };
	struct iovec riov[1];
	int riovcnt = 0;
	struct sr_qp *qp;
	enum resp_state state = RESPST_CHECK_QP;
	struct sr_rwqe rw;
	struct ibv_sge rsge[SR_MAX_SGE];
	struct iovec iov[SR_MAX_SGE];
	int iovcnt = 0;
	bool have_recv = false, dup = false;
	uint8_t *mem = NULL;

	qp = sr_qp_get(h->dst_qpn);
	if (!qp) {
		/* no such QP: dropped silently, the requester's timer takes over */
		sr_src_skip(src, src->left);
		return;
	}
	pthread_mutex_lock(&qp->lock);
	r.src_qpn = qp->ibv.qp_num;
	r.dst_qpn = h->src_qpn;
	r.psn = h->psn;

	/* IBA 10.3.1: only RTR, RTS and SQD accept incoming requests */
	if (qp->magic != SR_MAGIC_QP || qp->ibv.state < IBV_QPS_RTR || qp->ibv.state == IBV_QPS_ERR ||
	    qp->ibv.state == IBV_QPS_SQE || h->src_qpn != qp->attr.dest_qp_num) {
		state = RESPST_DROP;
		goto out;
	}
	state = RESPST_CHECK_PSN;
	/*
	 * IBA 9.7.5.1: after an RNR NAK the responder discards requests until the
	 * NAKed one is retried; a TCP stream loses nothing else, so any PSN but
	 * the expected one is such a discard (or a stale duplicate).
	 */
	if (h->psn != qp->epsn) {
		uint32_t behind = (qp->epsn - h->psn) & 0xffffff;

		if (behind >= 0x800000) {
			sr_hwc_add(SR_HWC_OUT_OF_SEQ_REQ, 1);
			state = RESPST_DROP;
			goto out;
		}
		/*
		 * IBA 9.7.5.1.4 duplicate request (the requester retried after a
		 * timeout): a SEND or WRITE is acknowledged again, not executed;
		 * a READ is executed again; an atomic's result is not kept: dropped.
		 */
		dup = true;
		sr_hwc_add(SR_HWC_DUP_REQ, 1);
		if (h->op == SR_OP_SEND || h->op == SR_OP_WRITE) {
			r.op = SR_OP_ACK;
			r.psn = (qp->epsn - 1) & 0xffffff;
			state = RESPST_ACK;
			goto out;
		}
		if (h->op != SR_OP_READ) {
			state = RESPST_DROP;
			goto out;
		}
	}

	switch (h->op) {
	case SR_OP_SEND:
		state = RESPST_GET_RECV;
		if (!sr_rq_pop(qp, &rw, rsge)) {
			state = RESPST_RNR_NAK;
			goto out;
		}
		have_recv = true;
		if (sr_mr_sge_to_iov(qp->pd, rw.sge, rw.num_sge, true, iov, &iovcnt)) {
			state = RESPST_ERR_LOCAL;
			goto out;
		}
		{
			uint64_t room = 0;

			for (int i = 0; i < iovcnt; i++)
				room += iov[i].iov_len;
			if (h->len > room) {
				state = RESPST_ERR_LENGTH;
				goto out;
			}
		}
		state = RESPST_EXECUTE;
		if (copy_in(src, iov, iovcnt, h->len))
			goto out;
		/* SEND with invalidate: the window is invalid before the CQE and the ACK are seen */
		if ((h->flags & SR_F_INV) && sr_mw_invalidate(qp, h->rkey, true)) {
			state = RESPST_ERR_INVALIDATE;
			goto out;
		}
		recv_cqe(qp, rw.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV, (uint32_t)h->len, h);
		sr_hwc_add(SR_HWC_RDMA_RECV, 1);
		have_recv = false;
		state = RESPST_ACK;
		break;
	case SR_OP_WRITE:
		state = RESPST_CHECK_RKEY;
		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_WRITE)) {
			state = RESPST_ERR_INV_REQ;
			goto out;
		}
		if (sr_mr_check_remote(qp, h->rkey, h->raddr, h->len, IBV_ACCESS_REMOTE_WRITE, &mem)) {
			state = RESPST_ERR_ACCESS;
			goto out;
		}
		if (h->flags & SR_F_IMM) {
			/* WRITE with immediate consumes a RECV WQE; none -> RNR before writing anything */
			if (!sr_rq_pop(qp, &rw, rsge)) {
				state = RESPST_RNR_NAK;
				goto out;
			}
			have_recv = true;
		}
		state = RESPST_EXECUTE;
		if (h->len && sr_src_copy(src, mem, h->len))
			goto out;
		if (have_recv) {
			/* byte_len carries the length written, as rxe reports it */
			recv_cqe(qp, rw.wr_id, IBV_WC_SUCCESS, IBV_WC_RECV_RDMA_WITH_IMM,
				 (uint32_t)h->len, h);
			sr_hwc_add(SR_HWC_RDMA_RECV, 1);
			have_recv = false;
		}
		state = RESPST_ACK;
		break;
	case SR_OP_READ:
		state = RESPST_CHECK_RKEY;
		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_READ) || src->left) {
			state = RESPST_ERR_INV_REQ;
			goto out;
		}
		if (sr_mr_check_remote(qp, h->rkey, h->raddr, h->len, IBV_ACCESS_REMOTE_READ, &mem)) {
			state = RESPST_ERR_ACCESS;
			goto out;
		}
		r.op = SR_OP_READ_RESP;
		r.len = h->len;
		riov[0].iov_base = mem;
		riov[0].iov_len = h->len;
		riovcnt = h->len ? 1 : 0;
		state = RESPST_ACK;
		break;
	case SR_OP_CMP_SWP:
	case SR_OP_FETCH_ADD: {
		uint64_t *p, old;

		state = RESPST_CHECK_RKEY;
		/* IBA 9.4.5: atomics operate on naturally aligned 8-byte words */
		if (!(qp->attr.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC) || (h->raddr & 7) ||
		    h->len != 8 || src->left) {
			state = RESPST_ERR_INV_REQ;
			goto out;
		}
		if (sr_mr_check_remote(qp, h->rkey, h->raddr, 8, IBV_ACCESS_REMOTE_ATOMIC, &mem)) {
			state = RESPST_ERR_ACCESS;
			goto out;
		}
		p = (uint64_t *)(void *)mem;
		if (h->op == SR_OP_FETCH_ADD) {
			old = __atomic_fetch_add(p, h->cmp_add, __ATOMIC_SEQ_CST);
		} else {
			old = h->cmp_add;
			__atomic_compare_exchange_n(p, &old, h->swap, false, __ATOMIC_SEQ_CST,
						    __ATOMIC_SEQ_CST);
		}
		r.op = SR_OP_ATOMIC_RESP;
		r.cmp_add = old;
		state = RESPST_ACK;
		break;
	}
	default:
		state = RESPST_ERR_INV_REQ;
		break;
	}

out:
	if (sr_debug && state != RESPST_ACK)
		sr_dbg("resp qp 0x%x: %s psn %u -> %s", h->dst_qpn, sr_opcode_name(h->op), h->psn,
		       resp_state_name[state]);
	if (src->left)
		sr_src_skip(src, src->left);
	switch (state) {
	case RESPST_ACK:
		if (!r.op)
			r.op = SR_OP_ACK;
		if (!dup)
			qp->epsn = (qp->epsn + 1) & 0xffffff;
		break;
	case RESPST_ERR_INVALIDATE:
		/*
		 * The rkey of a SEND with invalidate names no window bound to this QP
		 * (rxe's class J): the SEND is acknowledged, its RECV WQE completes in
		 * error and the responder QP goes to the error state.
		 */
		r.op = SR_OP_ACK;
		qp->epsn = (qp->epsn + 1) & 0xffffff;
		recv_cqe(qp, rw.wr_id, IBV_WC_REM_INV_REQ_ERR, IBV_WC_RECV, 0, h);
		have_recv = false;
		sr_qp_error(qp);
		break;
	case RESPST_RNR_NAK:
		/* IBA 9.7.5.2.8: RNR NAK carries the responder's minimum RNR timer */
		r.op = SR_OP_RNR_NAK;
		r.syndrome = qp->attr.min_rnr_timer;
		sr_hwc_add(SR_HWC_SND_RNR, 1);
		break;
	case RESPST_ERR_LENGTH:
	case RESPST_ERR_LOCAL:
	case RESPST_ERR_INV_REQ:
	case RESPST_ERR_ACCESS:
		/*
		 * IBA 9.9.3.1.2 (class C/D): the responder NAKs and its QP goes to
		 * the error state; a RECV WQE that was consumed completes in error.
		 */
		r.op = SR_OP_NAK;
		r.syndrome = state == RESPST_ERR_ACCESS ? SR_NAK_REM_ACCESS :
			     state == RESPST_ERR_LOCAL ? SR_NAK_REM_OP : SR_NAK_INV_REQ;
		if (have_recv)
			recv_cqe(qp, rw.wr_id,
				 state == RESPST_ERR_LENGTH ? IBV_WC_LOC_LEN_ERR :
				 state == RESPST_ERR_LOCAL ? IBV_WC_LOC_PROT_ERR : IBV_WC_REM_ACCESS_ERR,
				 h->op == SR_OP_SEND ? IBV_WC_RECV : IBV_WC_RECV_RDMA_WITH_IMM, 0, h);
		else if (state == RESPST_ERR_ACCESS || state == RESPST_ERR_INV_REQ)
			/*
			 * IBA 11.6.3.1: an error no receive WQE can report (an RDMA WRITE,
			 * READ or atomic) is an affiliated asynchronous error of the
			 * responder's QP: Local Access Violation or Invalid Request Work
			 * Queue Error, as hardware raises them.
			 */
			sr_async_event(qp->ibv.context, state == RESPST_ERR_ACCESS ?
				       IBV_EVENT_QP_ACCESS_ERR : IBV_EVENT_QP_REQ_ERR, &qp->ibv);
		sr_qp_error(qp);
		break;
	case RESPST_EXECUTE:
		/* the payload could not be read: the connection is gone */
		sr_qp_error(qp);
		r.op = 0;
		break;
	default:
		r.op = 0;
		break;
	}
	pthread_mutex_unlock(&qp->lock);
	if (r.op)
		sr_net_reply(from, &r, riov, riovcnt);
	sr_qp_put(qp);
}
