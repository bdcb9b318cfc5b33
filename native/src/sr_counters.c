/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Port counters, named as kernel rxe names its hw_counters
 * (/sys/class/infiniband/<dev>/ports/<n>/hw_counters/<name>), so a consumer
 * reads both the same way: softrdma_hw_counter_name(i) lists them,
 * softrdma_hw_counter(name) reads one. Counted per thread (one store, no
 * locked instruction, no cache line shared between the requester's and the
 * responder's threads) and summed when read; a thread's counts survive it.
 * What this device cannot have stays 0: rcvd_seq_err (its wire loses nothing,
 * so no PSN sequence NAK is sent), ack_deferred (rxe's completer deferral),
 * link_downed (its port never goes down).
 */
#include "sr.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static const char *const hwc_names[SR_HWC_NUM] = {
	[SR_HWC_SENT_PKTS] = "sent_pkts",
	[SR_HWC_RCVD_PKTS] = "rcvd_pkts",
	[SR_HWC_DUP_REQ] = "duplicate_request",
	[SR_HWC_OUT_OF_SEQ_REQ] = "out_of_seq_request",
	[SR_HWC_RCV_RNR] = "rcvd_rnr_err",
	[SR_HWC_SND_RNR] = "send_rnr_err",
	[SR_HWC_RCV_SEQ_ERR] = "rcvd_seq_err",
	[SR_HWC_ACK_DEFERRED] = "ack_deferred",
	[SR_HWC_RETRY_EXCEEDED] = "retry_exceeded_err",
	[SR_HWC_RNR_RETRY_EXCEEDED] = "retry_rnr_exceeded_err",
	[SR_HWC_COMP_RETRY] = "completer_retry_err",
	[SR_HWC_SEND_ERR] = "send_err",
	[SR_HWC_LINK_DOWNED] = "link_downed",
	[SR_HWC_RDMA_SEND] = "rdma_sends",
	[SR_HWC_RDMA_RECV] = "rdma_recvs",
};

__thread struct sr_hwc_block *sr_hwc_mine;
static pthread_mutex_t hwc_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sr_hwc_block *hwc_blocks;      /* threads alive */
static uint64_t hwc_retired[SR_HWC_NUM];     /* threads that ended */
static pthread_key_t hwc_key;
static pthread_once_t hwc_once = PTHREAD_ONCE_INIT;

static void hwc_thread_end(void *p)
{
	struct sr_hwc_block *b = p, **link;

	pthread_mutex_lock(&hwc_lock);
	for (int i = 0; i < SR_HWC_NUM; i++)
		hwc_retired[i] += atomic_load_explicit(&b->v[i], memory_order_relaxed);
	for (link = &hwc_blocks; *link; link = &(*link)->next) {
		if (*link == b) {
			*link = b->next;
			break;
		}
	}
	pthread_mutex_unlock(&hwc_lock);
	free(b);
}

static void hwc_init(void)
{
	pthread_key_create(&hwc_key, hwc_thread_end);
}

struct sr_hwc_block *sr_hwc_block_new(void)
{
	struct sr_hwc_block *b;

	pthread_once(&hwc_once, hwc_init);
	b = calloc(1, sizeof(*b));
	if (!b)
		return NULL; /* the count is lost, nothing else */
	pthread_mutex_lock(&hwc_lock);
	b->next = hwc_blocks;
	hwc_blocks = b;
	pthread_mutex_unlock(&hwc_lock);
	pthread_setspecific(hwc_key, b);
	sr_hwc_mine = b;
	return b;
}

SR_EXPORT const char *softrdma_hw_counter_name(unsigned int index)
{
	return index < SR_HWC_NUM ? hwc_names[index] : NULL;
}

SR_EXPORT long long softrdma_hw_counter(const char *name)
{
	uint64_t sum;
	int c;

	if (!name)
		return -1;
	for (c = 0; c < SR_HWC_NUM && strcmp(name, hwc_names[c]); c++)
		;
	if (c == SR_HWC_NUM)
		return -1;
	pthread_mutex_lock(&hwc_lock);
	sum = hwc_retired[c];
	for (struct sr_hwc_block *b = hwc_blocks; b; b = b->next)
		sum += atomic_load_explicit(&b->v[c], memory_order_relaxed);
	pthread_mutex_unlock(&hwc_lock);
	return (long long)sum;
}
