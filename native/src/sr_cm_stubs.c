/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdmacm for softrdma0: what it does not offer (multicast, ECE, rsockets
 * but rpoll/rselect) and the SRQ helpers on top of the verbs.
 */
#define _GNU_SOURCE
#include "sr_cm_int.h"

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/select.h>

/* ---- not offered: multicast, SRQ helpers, ECE; rsockets' poll/select ---------- */
SR_EXPORT int rdma_join_multicast(struct rdma_cm_id *id, struct sockaddr *addr, void *context)
{
	(void)id; (void)addr; (void)context;
	errno = ENOSYS;
	return -1;
}

SR_EXPORT int rdma_join_multicast_ex(struct rdma_cm_id *id, struct rdma_cm_join_mc_attr_ex *mc_join_attr,
				     void *context)
{
	(void)id; (void)mc_join_attr; (void)context;
	errno = ENOSYS;
	return -1;
}

SR_EXPORT int rdma_leave_multicast(struct rdma_cm_id *id, struct sockaddr *addr)
{
	(void)id; (void)addr;
	errno = ENOSYS;
	return -1;
}

SR_EXPORT int rdma_notify(struct rdma_cm_id *id, enum ibv_event_type event)
{
	(void)event;
	if (!to_id(id)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

SR_EXPORT int rdma_create_srq(struct rdma_cm_id *id, struct ibv_pd *pd, struct ibv_srq_init_attr *attr)
{
	struct cm_id *c = to_id(id);
	struct ibv_srq *srq;

	if (!c || !attr || !c->id.verbs) {
		errno = EINVAL;
		return -1;
	}
	if (!pd)
		pd = c->id.pd;
	if (!pd) {
		pd = ibv_alloc_pd(c->id.verbs);
		if (!pd)
			return -1;
		c->own_pd = true;
		c->id.pd = pd;
	}
	srq = ibv_create_srq(pd, attr);
	if (!srq)
		return -1;
	c->id.srq = srq;
	return 0;
}

SR_EXPORT int rdma_create_srq_ex(struct rdma_cm_id *id, struct ibv_srq_init_attr_ex *attr)
{
	struct ibv_srq_init_attr a;

	if (!attr) {
		errno = EINVAL;
		return -1;
	}
	memset(&a, 0, sizeof(a));
	a.srq_context = attr->srq_context;
	a.attr = attr->attr;
	return rdma_create_srq(id, (attr->comp_mask & IBV_SRQ_INIT_ATTR_PD) ? attr->pd : NULL, &a);
}

SR_EXPORT void rdma_destroy_srq(struct rdma_cm_id *id)
{
	struct cm_id *c = to_id(id);

	if (!c || !c->id.srq)
		return;
	ibv_destroy_srq(c->id.srq);
	c->id.srq = NULL;
}

SR_EXPORT int rdma_set_local_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id; (void)ece;
	errno = EOPNOTSUPP;
	return -1;
}

SR_EXPORT int rdma_get_remote_ece(struct rdma_cm_id *id, struct ibv_ece *ece)
{
	(void)id; (void)ece;
	errno = EOPNOTSUPP;
	return -1;
}

/* rsockets entry points: softrdma has no rsockets, but rping and ucmatose
 * import rpoll for plain descriptors, which is poll() */
SR_EXPORT int rpoll(struct pollfd *fds, nfds_t nfds, int timeout)
{
	return poll(fds, nfds, timeout);
}

SR_EXPORT int rselect(int nfds, fd_set *readfds, fd_set *writefds, fd_set *exceptfds,
		      struct timeval *timeout)
{
	return select(nfds, readfds, writefds, exceptfds, timeout);
}

/* the rest of the rsockets API exists so that programs linked against it load;
 * every call fails with ENOSYS (no prototypes: <rdma/rsocket.h> is not used) */
#define RSOCKET_STUB(name) SR_EXPORT int name(void); int name(void) { errno = ENOSYS; return -1; }
RSOCKET_STUB(rsocket)
RSOCKET_STUB(rbind)
RSOCKET_STUB(rlisten)
RSOCKET_STUB(raccept)
RSOCKET_STUB(rconnect)
RSOCKET_STUB(rshutdown)
RSOCKET_STUB(rclose)
RSOCKET_STUB(rrecv)
RSOCKET_STUB(rrecvfrom)
RSOCKET_STUB(rrecvmsg)
RSOCKET_STUB(rsend)
RSOCKET_STUB(rsendto)
RSOCKET_STUB(rsendmsg)
RSOCKET_STUB(rread)
RSOCKET_STUB(rreadv)
RSOCKET_STUB(rwrite)
RSOCKET_STUB(rwritev)
RSOCKET_STUB(rgetpeername)
RSOCKET_STUB(rgetsockname)
RSOCKET_STUB(rsetsockopt)
RSOCKET_STUB(rgetsockopt)
RSOCKET_STUB(rfcntl)
RSOCKET_STUB(riomap)
RSOCKET_STUB(riounmap)
RSOCKET_STUB(riowrite)
