/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The same-host wire: two instances of one host and one network namespace
 * exchange their message stream through a pair of shared-memory rings instead
 * of a TCP socket (sr_shm.c). The rings carry exactly the bytes a TCP
 * connection would (struct sr_hdr + payload), so the connection layer
 * (sr_net.c, sr_recv.c) runs the same framing, ACK coalescing and output
 * queue over both.
 */
#ifndef SR_SHM_H
#define SR_SHM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define SR_SHM_RING (2u << 20)          /* bytes per direction, a power of two */
/* doorbells: eventfds of a process's completion channels that a peer's writer signals itself */
#define SR_DB_SLOTS 4

/*
 * One direction, in shared memory. Producer and consumer each own one line;
 * the wait flags say that the other side sleeps and wants a wakeup:
 *   rd_fx / wr_fx: a thread sleeps in futex(2) on tail / head;
 *   rd_ev / wr_ev: the progress thread sleeps in epoll on its eventfd;
 *   rd_db: threads wait on completion channels (one bit per doorbell slot):
 *          the writer rings their doorbells itself and leaves the progress
 *          thread asleep, so a blocked reader is one wake-up away;
 *   rd_dbw: the same slots, for as long as their CQs are armed (a ring
 *          takes the rd_db bits, so a message that follows the one that rang
 *          finds them gone): a message that finds one leaves the progress
 *          thread asleep too, as the woken thread looks at every ring before
 *          it waits again (it sets rd_db first, then looks).
 * The side that sets a flag re-checks the ring after a full fence, the side
 * that moves tail/head checks the flags after one (Dekker), so no wakeup is
 * lost and nothing is signalled while the other side is awake.
 */
struct sr_ring_ctl {
	_Alignas(64) _Atomic uint32_t tail;      /* producer: bytes written, free-running */
	_Alignas(64) _Atomic uint32_t head;      /* consumer: bytes read, free-running */
	_Alignas(64) _Atomic uint32_t rd_fx, rd_ev, rd_db, rd_dbw; /* set by the consumer */
	_Alignas(64) _Atomic uint32_t wr_fx, wr_ev, wr_need;  /* set by the producer */
};

/* this process's view of one connection's rings */
struct sr_shm {
	struct sr_ring_ctl *tx, *rx;
	uint8_t *txd, *rxd;
	uint32_t tx_tail, rx_head;      /* local cursors, published by shm_tx_publish / shm_rx_release */
	uint32_t tx_head_seen;          /* last head read: space is known without touching its line */
	void *map;
	size_t map_len;
	int my_efd;                     /* the peer signals it; in this process's epoll */
	int peer_efd;                   /* this process signals it */
	int peer_db[SR_DB_SLOTS];       /* the peer's doorbells (slot i is rd_db bit i) */
	int n_peer_db;                  /* how many of them are open */
};

/* map a new pair of rings (connector: role 0) or an existing one from its memfd (role 1) */
int sr_shm_create(struct sr_shm *s, int *memfd);
int sr_shm_attach(struct sr_shm *s, int memfd);
/* replace the shared mapping by private zero pages (the memfd is let go) and close the fds: a
 * thread still looking at the rings sees them empty, never unmapped memory */
void sr_shm_detach(struct sr_shm *s);

uint32_t sr_shm_rx_avail(struct sr_shm *s);      /* bytes readable now */
void sr_shm_rx_get(struct sr_shm *s, void *dst, size_t len); /* dst NULL: skip; len <= avail */
void sr_shm_rx_release(struct sr_shm *s);        /* publish head, wake a waiting writer */
uint32_t sr_shm_tx_space(struct sr_shm *s);
void sr_shm_tx_put(struct sr_shm *s, const void *src, size_t len); /* len <= space */
void sr_shm_tx_publish(struct sr_shm *s);        /* publish tail, wake a sleeping reader */

/* wait until something is readable / need bytes are free; -1 after timeout_ms or once
 * *stop is set (checked every slice_ms) */
int sr_shm_wait_data(struct sr_shm *s, int timeout_ms, int slice_ms, const atomic_bool *stop);
int sr_shm_wait_space(struct sr_shm *s, uint32_t need, int timeout_ms, const atomic_bool *stop);
/* the progress thread goes to sleep: true if it must read first (a message is there) */
bool sr_shm_arm_rx(struct sr_shm *s, uint32_t min);
/* a queued output waits for space: true if there is space already */
bool sr_shm_arm_tx(struct sr_shm *s);
void sr_shm_disarm_rx(struct sr_shm *s);
/* threads of this process wait on the doorbells in bits: true if a message is there already */
bool sr_shm_arm_db(struct sr_shm *s, uint32_t bits, uint32_t min);
/* no CQ of these doorbell slots is armed any more: true if a message is there (it woke nobody) */
bool sr_shm_disarm_db(struct sr_shm *s, uint32_t bits, uint32_t min);
/* whether some doorbell covers the ring (its writer wakes a waiting thread, not the progress thread) */
bool sr_shm_db_armed(struct sr_shm *s);
/* wake this process's threads that sleep on the rings (the connection dies) */
void sr_shm_wake_local(struct sr_shm *s);

/* the hand-over of the rings on a Unix socket: a message with up to SR_SHM_MAX_FDS descriptors
 * (the connector's memfd and eventfd, then its doorbells; the acceptor's eventfd and doorbells) */
#define SR_SHM_MAX_FDS (2 + SR_DB_SLOTS)
int sr_shm_send_fds(int sock, const void *msg, size_t len, const int *fds, int nfds);
/* returns the message length, fills fds[0..*nfds) (-1 where none came) */
ssize_t sr_shm_recv_fds(int sock, void *msg, size_t len, int *fds, int *nfds);

#endif
