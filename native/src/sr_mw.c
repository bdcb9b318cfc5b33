/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory windows (IBA 10.6.7): type 1, bound with ibv_bind_mw() and valid on
 * every QP of its PD, and type 2B, bound by a BIND_MW work request posted on a
 * QP and valid on that QP alone, invalidated by LOCAL_INV or by a peer's
 * SEND_WITH_INV. A window grants remote access to a range of an MR registered
 * with IBV_ACCESS_MW_BIND, with the window's own access rights, not the MR's.
 *
 * Keys: a window's rkey is (SR_MW_KEY_BASE + index) << 8 | key, so window
 * and MR keys never collide (MR keys stay below 1 << 28); the low 8 bits are
 * the consumer's (the BIND_MW WR's rkey), as on rxe and hardware.
 *
 * The window table changes under sr_mr_lock held for writing (alloc,
 * dealloc); binds, invalidations and lookups run with it held for reading and
 * take the window's own lock.
 */
#include "sr.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define SR_MW_KEY_BASE 0x800000u        /* index bit 23: key bit 31 */
#define MW_ACCESS (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC)

static struct sr_mw **mw_table;         /* SR_MAX_MW entries, index 0 unused */
static uint32_t mw_hint = 1;

bool sr_mw_key(uint32_t rkey)
{
	return (rkey >> 8) >= SR_MW_KEY_BASE;
}

/* caller holds sr_mr_lock; the window whose current rkey is rkey */
static struct sr_mw *mw_lookup(uint32_t rkey)
{
	uint32_t idx = (rkey >> 8) - SR_MW_KEY_BASE;

	if (!sr_mw_key(rkey) || !mw_table || idx == 0 || idx >= SR_MAX_MW)
		return NULL;
	return mw_table[idx];
}

static bool is_mw(struct ibv_mw *mw)
{
	return mw && ((struct sr_mw *)mw)->magic == SR_MAGIC_MW;
}

struct ibv_mw *sr_alloc_mw(struct ibv_pd *ibpd, enum ibv_mw_type type)
{
	struct sr_pd *pd = (struct sr_pd *)ibpd;
	struct sr_mw *mw;
	uint32_t idx = 0;

	if (!ibpd || pd->magic != SR_MAGIC_PD || (type != IBV_MW_TYPE_1 && type != IBV_MW_TYPE_2)) {
		errno = EINVAL;
		return NULL;
	}
	mw = calloc(1, sizeof(*mw));
	if (!mw) {
		errno = ENOMEM;
		return NULL;
	}
	pthread_rwlock_wrlock(&sr_mr_lock);
	if (!mw_table)
		mw_table = calloc(SR_MAX_MW, sizeof(*mw_table));
	for (uint32_t n = 1; mw_table && n < SR_MAX_MW; n++) {
		uint32_t i = mw_hint++;

		if (mw_hint >= SR_MAX_MW)
			mw_hint = 1;
		if (!mw_table[i]) {
			idx = i;
			break;
		}
	}
	if (!idx) {
		pthread_rwlock_unlock(&sr_mr_lock);
		free(mw);
		errno = ENOMEM;
		return NULL;
	}
	sr_mutex_init(&mw->lock);
	mw->pd = pd;
	mw->rkey = (SR_MW_KEY_BASE + idx) << 8 | (uint32_t)(sr_random64() & 0xff);
	/* o10-37.2.x: a type 2 window starts free; type 1 is valid, bound to nothing */
	mw->state = type == IBV_MW_TYPE_2 ? SR_MW_FREE : SR_MW_VALID;
	mw->ibv.context = ibpd->context;
	mw->ibv.pd = ibpd;
	mw->ibv.rkey = mw->rkey;
	mw->ibv.handle = idx;
	mw->ibv.type = type;
	mw->magic = SR_MAGIC_MW;
	mw_table[idx] = mw;
	pthread_rwlock_unlock(&sr_mr_lock);
	atomic_fetch_add(&pd->users, 1);
	sr_count(SR_K_MW, 1);
	sr_dbg("alloc_mw type %d -> rkey 0x%x", type, mw->rkey);
	return &mw->ibv;
}

/* mw->lock held: drop the binding (MR and QP references) */
static void mw_unbind(struct sr_mw *mw)
{
	if (mw->mr)
		atomic_fetch_sub(&mw->mr->num_mw, 1);
	mw->mr = NULL;
	if (mw->qp)
		sr_qp_put(mw->qp);
	mw->qp = NULL;
	mw->access = 0;
	mw->addr = mw->length = 0;
	if (mw->ibv.type == IBV_MW_TYPE_2)
		mw->state = SR_MW_FREE;
}

int sr_dealloc_mw(struct ibv_mw *ibmw)
{
	struct sr_mw *mw = (struct sr_mw *)ibmw;

	if (!is_mw(ibmw))
		return EINVAL;
	/* waits for any access through the window to finish; deallocation invalidates it */
	pthread_rwlock_wrlock(&sr_mr_lock);
	mw_table[ibmw->handle] = NULL;
	mw->magic = SR_MAGIC_DEAD;
	pthread_mutex_lock(&mw->lock);
	mw_unbind(mw);
	pthread_mutex_unlock(&mw->lock);
	pthread_rwlock_unlock(&sr_mr_lock);
	atomic_fetch_sub(&mw->pd->users, 1);
	pthread_mutex_destroy(&mw->lock);
	sr_count(SR_K_MW, -1);
	sr_dbg("dealloc_mw rkey 0x%x", mw->rkey);
	free(mw);
	return 0;
}

/*
 * ibv_bind_mw() (type 1; the inline verb checked the type and the PDs): a
 * BIND_MW WR with the next 8-bit key, as rdma-core's providers post it. The
 * window's rkey is updated at once; if the bind completes in error the
 * consumer must restore it (man ibv_bind_mw).
 */
int sr_bind_mw(struct ibv_qp *qp, struct ibv_mw *ibmw, struct ibv_mw_bind *bind)
{
	struct ibv_send_wr wr, *bad;
	int err;

	if (!is_mw(ibmw) || !bind)
		return EINVAL;
	if (bind->bind_info.mw_access_flags & IBV_ACCESS_ZERO_BASED)
		return EINVAL;
	memset(&wr, 0, sizeof(wr));
	wr.wr_id = bind->wr_id;
	wr.opcode = IBV_WR_BIND_MW;
	wr.send_flags = bind->send_flags;
	wr.bind_mw.mw = ibmw;
	wr.bind_mw.rkey = ibv_inc_rkey(ibmw->rkey);
	wr.bind_mw.bind_info = bind->bind_info;
	err = sr_qp_post_send(qp, &wr, &bad);
	if (err)
		return err;
	ibmw->rkey = wr.bind_mw.rkey;
	return 0;
}

static int bind_check(struct sr_qp *qp, const struct sr_swqe *w, struct sr_mw *mw,
		      struct sr_mr *mr, int access)
{
	if (mw->ibv.type == IBV_MW_TYPE_1) {
		/* o10-36.2.2: type 1 windows are not zero based */
		if (access & IBV_ACCESS_ZERO_BASED)
			return -1;
	} else {
		/* o10-37.2.30: a type 2 window is bound only when free (invalidate it first) */
		if (mw->state != SR_MW_FREE)
			return -1;
		/* C10-72: the QP's PD is the window's */
		if (qp->pd != mw->pd)
			return -1;
		/* o10-37.2.40: a type 2 window cannot be unbound by binding nothing */
		if (!mr || w->mw_length == 0)
			return -1;
	}
	if (!mr)
		return 0;
	if (mr->pd != mw->pd || (mr->access & IBV_ACCESS_ZERO_BASED))
		return -1;
	/* C10-73: the MR allows binding */
	if (!(mr->access & IBV_ACCESS_MW_BIND))
		return -1;
	/* C10-74: a writable window needs local write on the MR */
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(mr->access & IBV_ACCESS_LOCAL_WRITE))
		return -1;
	/* C10-75: the window lies in the MR */
	if (w->mw_addr < mr->iova || w->mw_length > mr->ibv.length ||
	    w->mw_addr - mr->iova > mr->ibv.length - w->mw_length)
		return -1;
	return 0;
}

int sr_mw_bind(struct sr_qp *qp, const struct sr_swqe *w)
{
	struct sr_mw *mw = mw_lookup(w->mw_rkey);
	struct sr_mr *mr = NULL;
	int access = w->mw_access & (MW_ACCESS | IBV_ACCESS_ZERO_BASED);
	int err;

	if (!mw || mw->magic != SR_MAGIC_MW) {
		sr_dbg("qp 0x%x: bind: no window with rkey 0x%x", qp->ibv.qp_num, w->mw_rkey);
		return IBV_WC_MW_BIND_ERR;
	}
	if (w->mw_length) {
		mr = sr_mr_lookup(w->mr_lkey);
		if (!mr)
			return IBV_WC_MW_BIND_ERR;
	}
	pthread_mutex_lock(&mw->lock);
	/* the WR names the window by its current rkey (a stale one fails, as on rxe) */
	err = mw->rkey != w->mw_rkey ? -1 : bind_check(qp, w, mw, mr, access);
	if (!err) {
		mw_unbind(mw);
		mw->rkey = (mw->rkey & ~0xffu) | (w->rkey & 0xff);
		mw->access = access;
		mw->addr = w->mw_addr;
		mw->length = w->mw_length;
		if (mw->length) {
			mw->mr = mr;
			atomic_fetch_add(&mr->num_mw, 1);
		}
		if (mw->ibv.type == IBV_MW_TYPE_2) {
			atomic_fetch_add(&qp->refs, 1);
			mw->qp = qp;
		}
		mw->state = SR_MW_VALID;
	}
	pthread_mutex_unlock(&mw->lock);
	sr_dbg("qp 0x%x: bind window 0x%x -> 0x%x [0x%llx, +%llu) access 0x%x: %s", qp->ibv.qp_num,
	       w->mw_rkey, mw->rkey, (unsigned long long)w->mw_addr,
	       (unsigned long long)w->mw_length, access, err ? "refused" : "bound");
	return err ? IBV_WC_MW_BIND_ERR : IBV_WC_SUCCESS;
}

int sr_mw_invalidate(struct sr_qp *qp, uint32_t rkey, bool remote)
{
	struct sr_mw *mw = mw_lookup(rkey);
	int err = -1;

	/* an MR's rkey: softrdma MRs are not fast-registration MRs, they cannot be invalidated */
	if (!mw || mw->magic != SR_MAGIC_MW)
		goto out;
	pthread_mutex_lock(&mw->lock);
	/*
	 * o10-37.2.26: only type 2 windows are invalidated; the window must be
	 * bound and of the QP's PD, and for a remote invalidation (SEND with
	 * invalidate) bound to the QP the SEND arrives on.
	 */
	if (mw->rkey == rkey && mw->ibv.type == IBV_MW_TYPE_2 && mw->state == SR_MW_VALID &&
	    mw->pd == qp->pd && (!remote || mw->qp == qp)) {
		mw_unbind(mw);
		err = 0;
	}
	pthread_mutex_unlock(&mw->lock);
out:
	sr_dbg("qp 0x%x: %s invalidate 0x%x: %s", qp->ibv.qp_num, remote ? "remote" : "local", rkey,
	       err ? "refused" : "done");
	return err;
}

int sr_mw_check_remote(struct sr_qp *qp, uint32_t rkey, uint64_t addr, uint64_t len, int access,
		       uint8_t **out)
{
	struct sr_mw *mw = mw_lookup(rkey);
	int st = IBV_WC_REM_ACCESS_ERR;
	uint64_t base, off;

	if (!mw || mw->magic != SR_MAGIC_MW)
		return st;
	pthread_mutex_lock(&mw->lock);
	if (mw->rkey != rkey || mw->state != SR_MW_VALID || !mw->mr || mw->pd != qp->pd ||
	    (mw->ibv.type == IBV_MW_TYPE_2 && mw->qp != qp) || (mw->access & access) != access)
		goto out;
	/* the window's bounds, not the MR's: a zero-based window is addressed from 0 */
	base = (mw->access & IBV_ACCESS_ZERO_BASED) ? 0 : mw->addr;
	if (addr < base || len > mw->length || addr - base > mw->length - len)
		goto out;
	off = mw->addr + (addr - base) - mw->mr->iova;
	*out = (uint8_t *)mw->mr->ibv.addr + off;
	st = IBV_WC_SUCCESS;
out:
	pthread_mutex_unlock(&mw->lock);
	return st;
}
