/* Helpers shared by the tests: device selection, QP pairs connected by plain verbs or rdma_cm,
 * posting and polling with bounded waits, CQE field checks. Uses only the public verbs / rdma_cm API. */
#ifndef SR_COMMON_H
#define SR_COMMON_H

#include <arpa/inet.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <rdma/rdma_cma.h>
#include <stdint.h>
#include <sys/types.h>

#include "harness.h"

enum { CONN_VERBS = 1, CONN_CM = 2 };

/* test address (SOFTRDMA_TEST_ADDR, default 127.0.0.1) */
const char *test_addr(void);
struct sockaddr_in test_sockaddr(uint16_t port);
/* a port nothing listens on (bound and released) */

struct dev {
    struct ibv_context *ctx;
    uint8_t port;
    int gid_index;
    union ibv_gid gid;
    struct ibv_device_attr attr;
    struct ibv_port_attr pattr;
};
/* Opens the device/port/GID that carries test_addr() (env SOFTRDMA_TEST_DEV, SOFTRDMA_TEST_GID_INDEX
 * override). FAILs when nothing fits. */
void dev_open(struct dev *d);
void dev_close(struct dev *d);
/* find the GID index of ::ffff:<ipv4> on ctx/port; -1 if none */
int find_gid_index(struct ibv_context *ctx, uint8_t port, const char *ipv4, union ibv_gid *out);

struct qp_opts {
    int max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline;
    int sq_sig_all;
    int rnr_retry;     /* 0..7, 7 = infinite */
    int min_rnr_timer; /* IB encoding */
    int cq_size;
    int with_channel; /* create a completion channel per endpoint, CQs attached to it */
    int timeout, retry_cnt;
    struct ibv_srq *srq_b; /* optional SRQ for side b (verbs pairs only) */
};
void qp_opts_default(struct qp_opts *o);

struct ep {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *ch;
    struct ibv_cq *scq, *rcq;
    struct ibv_qp *qp;
    struct rdma_cm_id *id;          /* cm only */
    struct rdma_event_channel *ec; /* cm only: channel this id's events arrive on */
    uint32_t max_inline;
};

struct pair {
    int kind;
    struct dev dev; /* verbs pairs */
    struct ep a, b; /* a = client/requester, b = server/responder */
    struct rdma_cm_id *listen;
    struct rdma_event_channel *lec, *cec;
    struct qp_opts o;
};
const char *kind_name(int kind);
void pair_open(struct pair *p, int kind, const struct qp_opts *o);
/* cm pairs: rdma_disconnect + wait DISCONNECTED on both sides, then destroy everything */
void pair_close(struct pair *p);

/* plain verbs transitions */
void qp_to_init(struct ibv_qp *qp, uint8_t port);
void qp_to_rtr(struct ibv_qp *qp, const struct dev *d, uint32_t dqpn, uint32_t rq_psn, int min_rnr_timer);
void qp_to_rts(struct ibv_qp *qp, const struct dev *d, uint32_t sq_psn, int timeout, int retry_cnt, int rnr_retry);
enum ibv_qp_state qp_state(struct ibv_qp *qp);
/* wait until ibv_query_qp reports st (bounded) */
void wait_qp_state(struct ibv_qp *qp, enum ibv_qp_state st, int timeout_ms);

/* memory */
void *xalloc(size_t len); /* page aligned, zeroed */
struct ibv_mr *reg(struct ibv_pd *pd, void *buf, size_t len, int access); /* FAILs on error; remembered */
void dereg(struct ibv_mr *mr);
void dereg_pd(struct ibv_pd *pd); /* deregister every remembered MR of pd */
void fill_pattern(void *buf, size_t len, uint32_t seed);
int check_pattern(const void *buf, size_t len, uint32_t seed); /* returns 1 if equal */
uint64_t checksum64(const void *buf, size_t len);

/* posting (FAIL on nonzero return) */
void post_recv(struct ibv_qp *qp, uint64_t wr_id, void *addr, uint32_t len, uint32_t lkey);
void post_send(struct ibv_qp *qp, uint64_t wr_id, enum ibv_wr_opcode op, void *addr, uint32_t len, uint32_t lkey,
               int flags, uint32_t imm_be, uint64_t raddr, uint32_t rkey);
struct ibv_sge sge(void *addr, uint32_t len, uint32_t lkey);

/* polling: wait for exactly one completion (FAIL after timeout_ms) */
struct ibv_wc wait_wc(struct ibv_cq *cq, int timeout_ms);
/* nothing may arrive within ms */
void expect_no_wc(struct ibv_cq *cq, int ms);

/* CQE checks (for successful completions every field; for errors only wr_id/status/qp_num per man ibv_poll_cq) */
#define WC_ANY_LEN 0xFFFFFFFFu
void check_wc_ok(const struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_opcode op, uint32_t qp_num, uint32_t byte_len,
                 int with_imm, uint32_t imm_be);
void check_wc_err(const struct ibv_wc *wc, uint64_t wr_id, enum ibv_wc_status st, uint32_t qp_num);
const char *opcode_str(enum ibv_wc_opcode op);

/* rdma_cm helpers */
struct rdma_event_channel *cm_channel(void);
/* wait for the next event on ec (bounded); FAIL if it is not `type` */
struct rdma_cm_event *cm_expect(struct rdma_event_channel *ec, enum rdma_cm_event_type type, int timeout_ms);
/* next event or NULL on timeout */
struct rdma_cm_event *cm_next(struct rdma_event_channel *ec, int timeout_ms);
/* listener on test_addr():0 ; returns its port (host order) */
uint16_t cm_listen(struct rdma_event_channel *ec, struct rdma_cm_id **id);
/* client id: resolve addr+route to test_addr():port */
struct rdma_cm_id *cm_resolve(struct rdma_event_channel *ec, const char *addr, uint16_t port);
/* allocate PD/CQ and create the QP on a cm id */
void cm_ep_setup(struct ep *e, struct rdma_cm_id *id, struct rdma_event_channel *ec, const struct qp_opts *o);
void ep_destroy(struct ep *e);

/* softrdma only (tests that SKIP elsewhere): the registry directory, where rdma_cm keeps its port space in
 * rdma-cm/<ps>.<port>/<address> ($SOFTRDMA_RUNDIR, default /tmp/softrdma-<uid>) */
const char *rundir_path(void);
/* a private registry directory for this test, set before the device opens; named after the runner (the
 * test's parent) and tag, so that the teardown's rundir_remove(getpid(), tag) finds it */
void rundir_private(const char *tag);
void rundir_remove(pid_t runner, const char *tag);
/* a file of the port space, rdma-cm/tcp.<port>/<name>, created with `contents` (directories made); returns
 * its fd (the caller may flock it as a live claim) */
int cm_claim_file(uint16_t port, const char *name, const char *contents);
/* the TCP port underneath a live listener's claim rdma-cm/tcp.<port>/<name>; FAILs when there is none */
uint16_t cm_claim_tcp_port(uint16_t port, const char *name);

int fd_readable(int fd, int timeout_ms);
void msleep(int ms);
double now_ms(void);
int max_rd_atom(const struct ibv_device_attr *a);

#endif
