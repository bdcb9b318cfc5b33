/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Completer: matches responses to the oldest outstanding WQE and turns them
 * into CQEs; handles NAKs, RNR retries and transport timeouts.
 * Caller holds sr_mr_lock for reading.
 */
#include "sr.h"

#include <string.h>

enum comp_state {
	COMPST_GET_ACK, COMPST_CHECK_PSN, COMPST_READ, COMPST_ATOMIC, COMPST_COMP_ACK,
	COMPST_ERROR, COMPST_RNR_RETRY, COMPST_DROP, COMPST_NUM
};

static const char *const comp_state_name[COMPST_NUM] = {
	[COMPST_GET_ACK] = "GET_ACK", [COMPST_CHECK_PSN] = "CHECK_PSN", [COMPST_READ] = "READ",
	[COMPST_ATOMIC] = "ATOMIC", [COMPST_COMP_ACK] = "COMP_ACK", [COMPST_ERROR] = "ERROR",
	[COMPST_RNR_RETRY] = "RNR_RETRY", [COMPST_DROP] = "DROP",
};

/* IBA table 45 (9.7.5.2.8): RNR NAK timer field encodings, in microseconds */
static const uint32_t rnr_timer_us[32] = {
	655360, 10, 20, 30, 40, 60, 80, 120, 160, 240, 320, 480, 640, 960, 1280, 1920,
	2560, 3840, 5120, 7680, 10240, 15360, 20480, 30720, 40960, 61440, 81920, 122880,
	163840, 245760, 327680, 491520,
};

uint64_t sr_rnr_timer_ns(uint8_t code)
{
	return (uint64_t)rnr_timer_us[code & 31] * 1000;
}

/*
 * IBA 9.7.6.1.3: local ACK timeout is 4.096 us * 2^timeout, 0 = infinite.
 * TCP loses nothing, so a try only times out when the peer dropped the
 * request (its QP was not ready yet) or stopped answering; a try never lasts
 * less than 500 ms so that a loaded host is not mistaken for a dead peer.
 */
uint64_t sr_timeout_ns(uint8_t code)
{
	uint64_t ns;

	if (code == 0)
		return 0;
	ns = 4096ull << (code > 31 ? 31 : code);
	return ns < 500000000ull ? 500000000ull : ns;
}

static int copy_out(struct sr_src *src, const struct iovec *iov, int n, uint64_t len)
{
	for (int i = 0; i < n && len; i++) {
		size_t c = iov[i].iov_len < len ? iov[i].iov_len : len;

		if (sr_src_copy(src, iov[i].iov_base, c))
			return -1;
		len -= c;
	}
	return 0;
}

/*
 * complete WQEs at the head that failed locally while being transmitted, and
 * local operations (bind, invalidate) executed while requests ahead of them
 * were outstanding
 */
static void complete_local_errors(struct sr_qp *qp)
{
	while (qp->sq_head != qp->sq_next) {
		struct sr_swqe *w = &qp->sq[qp->sq_head % qp->sq_size];

		if (w->local_err) {
			sr_qp_complete_send(qp, w->local_err);
			sr_qp_error(qp);
			break;
		}
		if (!w->local_done)
			break;
		sr_qp_complete_send(qp, IBV_WC_SUCCESS);
	}
}

/* rdma_sends: SEND WQEs completed by the completer, in error too (not flushed), as rxe's do_complete counts */
static void count_send(const struct sr_swqe *w)
{
	if (w->opcode == IBV_WR_SEND || w->opcode == IBV_WR_SEND_WITH_IMM || w->opcode == IBV_WR_SEND_WITH_INV)
		sr_hwc_add(SR_HWC_RDMA_SEND, 1);
}

static enum ibv_wc_status nak_status(uint32_t syndrome)
{
	switch (syndrome) {
	case SR_NAK_REM_ACCESS:
		return IBV_WC_REM_ACCESS_ERR;
	case SR_NAK_REM_OP:
		return IBV_WC_REM_OP_ERR;
	case SR_NAK_INV_REQ:
		return IBV_WC_REM_INV_REQ_ERR;
	default:
		return IBV_WC_BAD_RESP_ERR;
	}
}

void sr_comp_handle(struct sr_hdr *h, struct sr_src *src)
{
	struct sr_qp *qp = sr_qp_get(h->dst_qpn);
	enum comp_state state = COMPST_GET_ACK;
	struct sr_swqe *w;
	bool retry_now = false;

	if (!qp) {
		sr_src_skip(src, src->left);
		return;
	}
	pthread_mutex_lock(&qp->lock);
	if (qp->magic != SR_MAGIC_QP || h->src_qpn != qp->attr.dest_qp_num ||
	    (qp->ibv.state != IBV_QPS_RTS && qp->ibv.state != IBV_QPS_SQD) ||
	    qp->sq_head == qp->sq_next) {
		state = COMPST_DROP;
		goto out;
	}
	state = COMPST_CHECK_PSN;
	w = &qp->sq[qp->sq_head % qp->sq_size];
	/* responses come in request order (ACKs may cover several); anything else is stale */
	if (w->local_err || (h->op == SR_OP_ACK ? ((h->psn - w->psn) & 0xffffff) >= 0x800000 :
			     w->psn != h->psn)) {
		state = COMPST_DROP;
		goto out;
	}
	qp->last_progress_ns = sr_now_ns();
	switch (h->op) {
	case SR_OP_ACK:
		/* IBA 9.7.5.1.1: a coalesced ACK completes every SEND/WRITE up to its PSN */
		state = COMPST_COMP_ACK;
		while (qp->sq_head != qp->sq_next) {
			w = &qp->sq[qp->sq_head % qp->sq_size];
			if (((h->psn - w->psn) & 0xffffff) >= 0x800000 || w->local_err ||
			    w->opcode == IBV_WR_RDMA_READ || w->opcode == IBV_WR_ATOMIC_CMP_AND_SWP ||
			    w->opcode == IBV_WR_ATOMIC_FETCH_AND_ADD)
				break;
			count_send(w);
			sr_qp_complete_send(qp, IBV_WC_SUCCESS);
		}
		break;
	case SR_OP_READ_RESP: {
		struct iovec iov[SR_MAX_SGE];
		int iovcnt;

		if (w->opcode != IBV_WR_RDMA_READ || h->len != w->length) {
			state = COMPST_DROP;
			goto out;
		}
		state = COMPST_READ;
		if (sr_mr_sge_to_iov(qp->pd, w->sge, w->num_sge, true, iov, &iovcnt)) {
			/* the MR went away between request and response */
			sr_qp_complete_send(qp, IBV_WC_LOC_PROT_ERR);
			sr_qp_error(qp);
			break;
		}
		if (copy_out(src, iov, iovcnt, h->len)) {
			sr_qp_complete_send(qp, IBV_WC_RETRY_EXC_ERR);
			sr_qp_error(qp);
			break;
		}
		state = COMPST_COMP_ACK;
		sr_qp_complete_send(qp, IBV_WC_SUCCESS);
		break;
	}
	case SR_OP_ATOMIC_RESP: {
		struct iovec iov[1];
		int iovcnt;

		if ((w->opcode != IBV_WR_ATOMIC_CMP_AND_SWP && w->opcode != IBV_WR_ATOMIC_FETCH_AND_ADD) ||
		    src->left) {
			state = COMPST_DROP;
			goto out;
		}
		state = COMPST_ATOMIC;
		if (sr_mr_sge_to_iov(qp->pd, w->sge, 1, true, iov, &iovcnt) || iovcnt != 1) {
			sr_qp_complete_send(qp, IBV_WC_LOC_PROT_ERR);
			sr_qp_error(qp);
			break;
		}
		memcpy(iov[0].iov_base, &h->cmp_add, 8);
		state = COMPST_COMP_ACK;
		sr_qp_complete_send(qp, IBV_WC_SUCCESS);
		break;
	}
	case SR_OP_NAK:
		/* IBA 9.9.2: a NAK other than PSN sequence error completes the WQE in error */
		state = COMPST_ERROR;
		count_send(w);
		sr_qp_complete_send(qp, nak_status(h->syndrome));
		sr_qp_error(qp);
		break;
	case SR_OP_RNR_NAK:
		state = COMPST_RNR_RETRY;
		sr_hwc_add(SR_HWC_RCV_RNR, 1);
		/* IBA 9.7.5.2.8: retry after the timer, rnr_retry times; 7 means infinite */
		if (qp->rnr_left == 0) {
			sr_hwc_add(SR_HWC_RNR_RETRY_EXCEEDED, 1);
			count_send(w);
			sr_qp_complete_send(qp, IBV_WC_RNR_RETRY_EXC_ERR);
			sr_qp_error(qp);
			break;
		}
		if (qp->attr.rnr_retry != 7)
			qp->rnr_left--;
		/* go back N: the responder dropped everything after the NAKed PSN */
		qp->sq_next = qp->sq_head;
		qp->next_psn = w->psn;
		qp->rnr_wait = true;
		qp->timer_deadline_ns = sr_now_ns() + sr_rnr_timer_ns((uint8_t)h->syndrome);
		retry_now = true;
		break;
	default:
		state = COMPST_DROP;
		break;
	}
	complete_local_errors(qp);
out:
	if (sr_debug && state != COMPST_COMP_ACK)
		sr_dbg("comp qp 0x%x: %s psn %u -> %s", h->dst_qpn, sr_opcode_name(h->op), h->psn,
		       comp_state_name[state]);
	pthread_mutex_unlock(&qp->lock);
	if (src->left)
		sr_src_skip(src, src->left);
	if (retry_now)
		sr_net_kick_timer();
	sr_qp_put(qp);
}

/* progress thread: RNR timer expiry and transport timeout */
void sr_comp_timer(struct sr_qp *qp, uint64_t now)
{
	bool resend = false;

	pthread_mutex_lock(&qp->lock);
	if (qp->magic != SR_MAGIC_QP) {
		pthread_mutex_unlock(&qp->lock);
		return;
	}
	if (qp->rnr_wait) {
		if (now >= qp->timer_deadline_ns) {
			qp->rnr_wait = false;
			qp->timer_deadline_ns = 0;
			qp->last_progress_ns = now;
			resend = true;
		}
	} else if (qp->ibv.state == IBV_QPS_RTS || qp->ibv.state == IBV_QPS_SQD) {
		uint64_t t = sr_timeout_ns(qp->attr.timeout);

		/* signed: the scan's clock reading may predate a progress stamp */
		if (t && qp->sq_head != qp->sq_next &&
		    (int64_t)(now - qp->last_progress_ns) > (int64_t)t) {
			if (qp->retry_left > 0) {
				/* IBA 9.7.6.1.3: retry from the oldest unacknowledged request */
				sr_dbg("qp 0x%x: no response: retry (%d left)", qp->ibv.qp_num,
				       qp->retry_left - 1);
				qp->retry_left--;
				sr_hwc_add(SR_HWC_COMP_RETRY, 1);
				qp->sq_next = qp->sq_head;
				qp->next_psn = qp->sq[qp->sq_head % qp->sq_size].psn;
				qp->last_progress_ns = sr_now_ns();
				resend = true;
			} else {
				sr_dbg("qp 0x%x: no response: retry exceeded", qp->ibv.qp_num);
				sr_hwc_add(SR_HWC_RETRY_EXCEEDED, 1);
				count_send(&qp->sq[qp->sq_head % qp->sq_size]);
				sr_qp_complete_send(qp, IBV_WC_RETRY_EXC_ERR);
				sr_qp_error(qp);
			}
		}
	}
	pthread_mutex_unlock(&qp->lock);
	if (resend)
		sr_req_progress(qp);
}

/*
 * The peer's process is gone (its stream ended): what is outstanding can
 * never be acknowledged, which on a real fabric ends as "retry exceeded".
 * A QP with nothing outstanding is left alone, as on a fabric, where a dead
 * peer shows only when the QP next sends (the send then fails at once here):
 * its posted receives stay, and completions the application is still
 * reaping (the peer's last messages, the ACK of our last SEND) are not
 * followed by flushed receives it did not expect (ibv_rc_pingpong's server).
 */
void sr_comp_peer_lost(struct sr_qp *qp)
{
	pthread_mutex_lock(&qp->lock);
	if (qp->magic == SR_MAGIC_QP && qp->ibv.state >= IBV_QPS_RTR && qp->ibv.state != IBV_QPS_ERR &&
	    qp->sq_head != qp->sq_tail) {
		sr_dbg("qp 0x%x: peer lost", qp->ibv.qp_num);
		if (qp->sq_head != qp->sq_tail) {
			sr_hwc_add(SR_HWC_RETRY_EXCEEDED, 1);
			count_send(&qp->sq[qp->sq_head % qp->sq_size]);
			sr_qp_complete_send(qp, IBV_WC_RETRY_EXC_ERR);
		}
		sr_qp_error(qp);
	}
	pthread_mutex_unlock(&qp->lock);
}
