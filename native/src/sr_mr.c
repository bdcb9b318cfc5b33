/* SPDX-License-Identifier: Apache-2.0 */
/* Protection domains and memory regions; key lookup and access checks. */
#include "sr.h"

#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#undef ibv_reg_mr
#undef ibv_reg_mr_iova

/*
 * MR keys: index into the table in the high bits, 8 random bits below, so a
 * key is unique while the MR lives and a stale or guessed key rarely matches.
 * lkey == rkey, as on rxe.
 */
#define KEY_RAND_BITS 8

pthread_rwlock_t sr_mr_lock = PTHREAD_RWLOCK_INITIALIZER;
static struct sr_mr **mr_table;      /* SR_MAX_MR entries, index 0 unused */
static uint32_t mr_hint = 1;

/*
 * Pinned memory, as the kernel accounts it for ibv_reg_mr (ib_umem_get): every
 * page a region spans is added to the process's pinned_vm, and past
 * RLIMIT_MEMLOCK the registration fails with ENOMEM unless the process has
 * CAP_IPC_LOCK. Nothing is mlock'ed here (this device reads the memory in
 * place), so the limit is what a tight ulimit -l is tested against.
 */
static atomic_ulong pinned_pages;

static uint64_t page_size(void)
{
	static uint64_t size;

	if (!size)
		size = (uint64_t)sysconf(_SC_PAGESIZE);
	return size;
}

static uint64_t span_pages(const void *addr, size_t length)
{
	uint64_t page = page_size();
	uint64_t first = (uintptr_t)addr & ~(page - 1);
	uint64_t end = ((uintptr_t)addr + length + page - 1) & ~(page - 1);

	return length ? (end - first) / page : 0;
}

static bool cap_ipc_lock(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[2] = { 0 };

	if (syscall(SYS_capget, &hdr, data))
		return false;
	return data[CAP_IPC_LOCK / 32].effective & (1u << (CAP_IPC_LOCK % 32));
}

static int pin(uint64_t npages)
{
	struct rlimit rl;
	uint64_t now = atomic_fetch_add(&pinned_pages, npages) + npages;

	if (npages && !getrlimit(RLIMIT_MEMLOCK, &rl) && rl.rlim_cur != RLIM_INFINITY &&
	    now > rl.rlim_cur / page_size() && !cap_ipc_lock()) {
		atomic_fetch_sub(&pinned_pages, npages);
		return ENOMEM;
	}
	return 0;
}

static void unpin(uint64_t npages)
{
	atomic_fetch_sub(&pinned_pages, npages);
}

static bool is_pd(struct ibv_pd *pd)
{
	return pd && ((struct sr_pd *)pd)->magic == SR_MAGIC_PD;
}

SR_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	static atomic_uint handles;
	struct sr_pd *pd;

	if (!ctx || ctx->abi_compat != __VERBS_ABI_IS_EXTENDED) {
		errno = EINVAL;
		return NULL;
	}
	if (atomic_load(&sr_counts[SR_K_PD]) >= SR_MAX_PD) {
		errno = ENOMEM;
		return NULL;
	}
	pd = calloc(1, sizeof(*pd));
	if (!pd) {
		errno = ENOMEM;
		return NULL;
	}
	pd->ibv.context = ctx;
	pd->ibv.handle = atomic_fetch_add(&handles, 1);
	pd->magic = SR_MAGIC_PD;
	sr_count(SR_K_PD, 1);
	return &pd->ibv;
}

SR_EXPORT int ibv_dealloc_pd(struct ibv_pd *ibpd)
{
	struct sr_pd *pd = (struct sr_pd *)ibpd;

	if (!is_pd(ibpd))
		return EINVAL;
	/* the kernel refuses to free a PD that MRs, QPs or SRQs still use */
	if (atomic_load(&pd->users))
		return EBUSY;
	pd->magic = SR_MAGIC_DEAD;
	sr_count(SR_K_PD, -1);
	free(pd);
	return 0;
}

static int key_alloc(struct sr_mr *mr)
{
	uint32_t idx;

	if (!mr_table) {
		mr_table = calloc(SR_MAX_MR, sizeof(*mr_table));
		if (!mr_table)
			return ENOMEM;
	}
	for (uint32_t n = 0; n < SR_MAX_MR; n++) {
		idx = mr_hint++;
		if (mr_hint >= SR_MAX_MR)
			mr_hint = 1;
		if (!mr_table[idx]) {
			uint32_t key = idx << KEY_RAND_BITS |
				       (uint32_t)(sr_random64() & ((1u << KEY_RAND_BITS) - 1));
			mr_table[idx] = mr;
			mr->ibv.lkey = mr->ibv.rkey = key;
			mr->ibv.handle = idx;
			return 0;
		}
	}
	return ENOMEM;
}

struct sr_mr *sr_mr_lookup(uint32_t key)
{
	uint32_t idx = key >> KEY_RAND_BITS;
	struct sr_mr *mr;

	if (!mr_table || idx == 0 || idx >= SR_MAX_MR)
		return NULL;
	mr = mr_table[idx];
	if (!mr || mr->ibv.lkey != key)
		return NULL;
	return mr;
}

/* IBA 10.6.3.1: remote write or atomic access requires local write access */
static bool access_ok(int access)
{
	if ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	    !(access & IBV_ACCESS_LOCAL_WRITE))
		return false;
	return true;
}

SR_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *ibpd, void *addr, size_t length,
					  uint64_t iova, unsigned int access)
{
	struct sr_pd *pd = (struct sr_pd *)ibpd;
	struct sr_mr *mr;
	int err;

	/* optional access bits (relaxed ordering, ...) may be ignored by any device */
	access &= IBV_ACCESS_OPTIONAL_FIRST - 1;
	if (!is_pd(ibpd) || !access_ok((int)access) || (!addr && length)) {
		errno = EINVAL;
		return NULL;
	}
	mr = calloc(1, sizeof(*mr));
	if (!mr) {
		errno = ENOMEM;
		return NULL;
	}
	mr->pinned_pages = span_pages(addr, length);
	err = pin(mr->pinned_pages);
	if (err) {
		sr_dbg("reg_mr len %zu: RLIMIT_MEMLOCK exceeded", length);
		free(mr);
		errno = err;
		return NULL;
	}
	mr->ibv.context = ibpd->context;
	mr->ibv.pd = ibpd;
	mr->ibv.addr = addr;
	mr->ibv.length = length;
	mr->pd = pd;
	mr->access = (int)access;
	mr->iova = iova;
	mr->magic = SR_MAGIC_MR;
	pthread_rwlock_wrlock(&sr_mr_lock);
	err = key_alloc(mr);
	pthread_rwlock_unlock(&sr_mr_lock);
	if (err) {
		unpin(mr->pinned_pages);
		free(mr);
		errno = err;
		return NULL;
	}
	atomic_fetch_add(&pd->users, 1);
	sr_count(SR_K_MR, 1);
	sr_dbg("reg_mr addr %p len %zu access 0x%x -> key 0x%x", addr, length, access, mr->ibv.lkey);
	return &mr->ibv;
}

SR_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned int)access);
}

SR_EXPORT struct ibv_mr *ibv_reg_mr_iova(struct ibv_pd *pd, void *addr, size_t length,
					 uint64_t iova, int access)
{
	return ibv_reg_mr_iova2(pd, addr, length, iova, (unsigned int)access);
}

SR_EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t offset, size_t length,
					   uint64_t iova, int fd, int access)
{
	(void)pd; (void)offset; (void)length; (void)iova; (void)fd; (void)access;
	errno = EOPNOTSUPP;
	return NULL;
}

SR_EXPORT int ibv_dereg_mr(struct ibv_mr *ibmr)
{
	struct sr_mr *mr = (struct sr_mr *)ibmr;

	if (!ibmr || mr->magic != SR_MAGIC_MR)
		return EINVAL;
	/* waits for any copy into or out of this MR to finish */
	pthread_rwlock_wrlock(&sr_mr_lock);
	/* IBA 10.6.7.2.6: an MR with windows bound to it stays (rxe: EINVAL) */
	if (atomic_load(&mr->num_mw)) {
		pthread_rwlock_unlock(&sr_mr_lock);
		return EINVAL;
	}
	mr_table[ibmr->handle] = NULL;
	mr->magic = SR_MAGIC_DEAD;
	pthread_rwlock_unlock(&sr_mr_lock);
	atomic_fetch_sub(&mr->pd->users, 1);
	unpin(mr->pinned_pages);
	sr_count(SR_K_MR, -1);
	free(mr);
	return 0;
}

SR_EXPORT int ibv_rereg_mr(struct ibv_mr *ibmr, int flags, struct ibv_pd *ibpd, void *addr,
			   size_t length, int access)
{
	struct sr_mr *mr = (struct sr_mr *)ibmr;

	if (!ibmr || mr->magic != SR_MAGIC_MR || !flags ||
	    (flags & ~(IBV_REREG_MR_CHANGE_TRANSLATION | IBV_REREG_MR_CHANGE_PD |
		       IBV_REREG_MR_CHANGE_ACCESS)))
		return IBV_REREG_MR_ERR_INPUT;
	if ((flags & IBV_REREG_MR_CHANGE_PD) && !is_pd(ibpd))
		return IBV_REREG_MR_ERR_INPUT;
	access &= IBV_ACCESS_OPTIONAL_FIRST - 1;
	if ((flags & IBV_REREG_MR_CHANGE_ACCESS) && !access_ok(access))
		return IBV_REREG_MR_ERR_INPUT;
	pthread_rwlock_wrlock(&sr_mr_lock);
	/* the windows bound to it were checked against what it is now */
	if (atomic_load(&mr->num_mw)) {
		pthread_rwlock_unlock(&sr_mr_lock);
		return IBV_REREG_MR_ERR_INPUT;
	}
	if (flags & IBV_REREG_MR_CHANGE_TRANSLATION) {
		uint64_t npages = span_pages(addr, length);

		/* the new range is pinned before the old one is let go, as the kernel does */
		if (pin(npages)) {
			pthread_rwlock_unlock(&sr_mr_lock);
			errno = ENOMEM;
			return IBV_REREG_MR_ERR_CMD;
		}
		unpin(mr->pinned_pages);
		mr->pinned_pages = npages;
		mr->ibv.addr = addr;
		mr->ibv.length = length;
		mr->iova = (uintptr_t)addr;
	}
	if (flags & IBV_REREG_MR_CHANGE_PD) {
		atomic_fetch_sub(&mr->pd->users, 1);
		mr->pd = (struct sr_pd *)ibpd;
		mr->ibv.pd = ibpd;
		atomic_fetch_add(&mr->pd->users, 1);
	}
	if (flags & IBV_REREG_MR_CHANGE_ACCESS)
		mr->access = access;
	pthread_rwlock_unlock(&sr_mr_lock);
	return 0;
}

/* caller holds sr_mr_lock for reading */
int sr_mr_check_remote(struct sr_qp *qp, uint32_t rkey, uint64_t addr, uint64_t len, int access,
		       uint8_t **out)
{
	struct sr_mr *mr;

	*out = NULL;
	/* IBA 9.7.4.1.3: a zero-length RDMA operation does not check the R_Key */
	if (len == 0)
		return IBV_WC_SUCCESS;
	/* a window's rkey: its QP, bounds and access decide (sr_mw.c) */
	if (sr_mw_key(rkey))
		return sr_mw_check_remote(qp, rkey, addr, len, access, out);
	/* an MR's rkey is valid on every QP of its PD */
	mr = sr_mr_lookup(rkey);
	if (!mr || mr->pd != qp->pd || (mr->access & access) != access)
		return IBV_WC_REM_ACCESS_ERR;
	if (addr < mr->iova || len > mr->ibv.length || addr - mr->iova > mr->ibv.length - len)
		return IBV_WC_REM_ACCESS_ERR;
	*out = (uint8_t *)mr->ibv.addr + (addr - mr->iova);
	return IBV_WC_SUCCESS;
}

/* caller holds sr_mr_lock for reading; iov has room for n entries */
int sr_mr_sge_to_iov(struct sr_pd *pd, const struct ibv_sge *sge, uint32_t n, bool need_write,
		     struct iovec *iov, int *iovcnt)
{
	int cnt = 0;

	for (uint32_t i = 0; i < n; i++) {
		struct sr_mr *mr;
		uint64_t off;

		if (sge[i].length == 0)
			continue;
		mr = sr_mr_lookup(sge[i].lkey);
		if (!mr || mr->pd != pd || (need_write && !(mr->access & IBV_ACCESS_LOCAL_WRITE)))
			return IBV_WC_LOC_PROT_ERR;
		if (sge[i].addr < mr->iova || sge[i].length > mr->ibv.length ||
		    sge[i].addr - mr->iova > mr->ibv.length - sge[i].length)
			return IBV_WC_LOC_PROT_ERR;
		off = sge[i].addr - mr->iova;
		iov[cnt].iov_base = (uint8_t *)mr->ibv.addr + off;
		iov[cnt].iov_len = sge[i].length;
		cnt++;
	}
	*iovcnt = cnt;
	return IBV_WC_SUCCESS;
}
