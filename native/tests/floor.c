/*
 * The floors that perftest's numbers are compared with (native/scripts/perftest.sh), measured in the
 * same run on the same machine:
 *   floor pingpong [-n iters] [-s bytes]   raw-verbs ping-pong between two RC QPs of ONE process,
 *                                          one busy-polling thread per side, as ib_send_lat does
 *                                          between two; prints the median and 99th percentile of
 *                                          half a round trip (ib_send_lat's t_typical). The operation
 *                                          is the one the transport uses for that size: SEND up to
 *                                          8 KiB (its receive slot), RDMA WRITE WITH IMMEDIATE above;
 *                                          the path MTU is the port's active MTU, as rdma_cm sets it;
 *                                          -o: both sides on ONE thread, in turn (the echo's whole CPU
 *                                          cost in sequence, no exchange between cores)
 *   floor tcp [-s bytes] [-t seconds]      TCP loopback throughput between two processes, one
 *                                          writer and one reader of bytes-sized writes (MB/s = 10^6)
 *   floor connect [-n conns] [-w wave] [-a addr]
 *                                          rdma_cm connection set-up between two processes: the client
 *                                          connects n RC QPs in waves of w concurrent connects and keeps
 *                                          them all open; prints connections per second
 * Uses only the verbs / rdma_cm API: it runs on the software device and on kernel rxe alike.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <rdma/rdma_cma.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "floor: %s: %s\n", what, strerror(errno));
	exit(1);
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---- in-process ping-pong ---------------------------------------------------------- */
struct side {
	struct ibv_qp *qp;
	struct ibv_cq *cq;
	struct ibv_mr *mr;
	uint8_t *buf;
	int size, iters;
	uint64_t *rtt;                  /* ping side only */
	struct side *peer;              /* WRITE WITH IMMEDIATE writes the peer's buffer */
};

/* the transport's receive slot: larger messages go as RDMA WRITE WITH IMMEDIATE */
#define SEND_MAX 8192

static void post_recv(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)s->size, s->mr->lkey };
	struct ibv_recv_wr wr = { .wr_id = 1, .sg_list = &sge, .num_sge = s->size > SEND_MAX ? 0 : 1 }, *bad;

	if (ibv_post_recv(s->qp, &wr, &bad))
		die("ibv_post_recv");
}

static void post_send(struct side *s)
{
	struct ibv_sge sge = { (uintptr_t)s->buf, (uint32_t)s->size, s->mr->lkey };
	struct ibv_send_wr wr = { .wr_id = 2, .sg_list = &sge, .num_sge = 1, .opcode = IBV_WR_SEND,
				  .send_flags = IBV_SEND_SIGNALED }, *bad;

	if (s->size <= 64)
		wr.send_flags |= IBV_SEND_INLINE;
	if (s->size > SEND_MAX) {
		wr.opcode = IBV_WR_RDMA_WRITE_WITH_IMM;
		wr.imm_data = htonl((uint32_t)s->size);
		wr.wr.rdma.remote_addr = (uintptr_t)s->peer->buf;
		wr.wr.rdma.rkey = s->peer->mr->rkey;
	}
	if (ibv_post_send(s->qp, &wr, &bad))
		die("ibv_post_send");
}

/* wait for the receive (and reap send completions on the way) */
static void wait_recv(struct side *s)
{
	struct ibv_wc wc[4];

	for (;;) {
		int n = ibv_poll_cq(s->cq, 4, wc);

		if (n < 0)
			die("ibv_poll_cq");
		for (int i = 0; i < n; i++) {
			if (wc[i].status != IBV_WC_SUCCESS) {
				fprintf(stderr, "floor: completion status %s\n", ibv_wc_status_str(wc[i].status));
				exit(1);
			}
			if (wc[i].opcode == IBV_WC_RECV || wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM)
				return;
		}
	}
}

static void *pong(void *arg)
{
	struct side *s = arg;

	for (int i = 0; i < s->iters; i++) {
		wait_recv(s);
		post_recv(s);
		post_send(s);
	}
	return NULL;
}

/* both ends on this thread: send, the peer receives and answers, receive */
static void ping_one_thread(struct side *s)
{
	struct side *p = s->peer;

	for (int i = 0; i < s->iters; i++) {
		uint64_t t = now_ns();

		post_send(s);
		wait_recv(p);
		post_recv(p);
		post_send(p);
		wait_recv(s);
		post_recv(s);
		s->rtt[i] = now_ns() - t;
	}
}

static void ping(struct side *s)
{
	for (int i = 0; i < s->iters; i++) {
		uint64_t t = now_ns();

		post_send(s);
		wait_recv(s);
		post_recv(s);
		s->rtt[i] = now_ns() - t;
	}
}

static void connect_qp(struct ibv_qp *qp, uint32_t dest, const union ibv_gid *gid, enum ibv_mtu mtu)
{
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_INIT, .port_num = 1,
				 .qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE };

	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS))
		die("modify INIT");
	memset(&a, 0, sizeof(a));
	a.qp_state = IBV_QPS_RTR;
	a.path_mtu = mtu;
	a.dest_qp_num = dest;
	a.rq_psn = 1;
	a.max_dest_rd_atomic = 1;
	a.min_rnr_timer = 1;
	a.ah_attr.is_global = 1;
	a.ah_attr.grh.dgid = *gid;
	a.ah_attr.grh.hop_limit = 1;
	a.ah_attr.port_num = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
			  IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
		die("modify RTR");
	a.qp_state = IBV_QPS_RTS;
	a.sq_psn = 1;
	a.timeout = 14;
	a.retry_cnt = 7;
	a.rnr_retry = 7;
	a.max_rd_atomic = 1;
	if (ibv_modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			  IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC))
		die("modify RTS");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static int pingpong(int iters, int size, int one_thread)
{
	struct ibv_device **list = ibv_get_device_list(NULL);
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	struct side s[2];
	union ibv_gid gid;
	struct ibv_port_attr port;
	pthread_t th;
	int warm = iters / 10;

	if (!list || !list[0])
		die("no RDMA device");
	ctx = ibv_open_device(list[0]);
	if (!ctx || ibv_query_gid(ctx, 1, 0, &gid) || ibv_query_port(ctx, 1, &port))
		die("ibv_open_device");
	pd = ibv_alloc_pd(ctx);
	if (!pd)
		die("ibv_alloc_pd");
	for (int i = 0; i < 2; i++) {
		struct ibv_qp_init_attr qa = { .qp_type = IBV_QPT_RC,
					       .cap = { .max_send_wr = 16, .max_recv_wr = 16,
							.max_send_sge = 1, .max_recv_sge = 1,
							.max_inline_data = 64 } };

		memset(&s[i], 0, sizeof(s[i]));
		s[i].size = size;
		s[i].iters = iters + warm;
		s[i].buf = calloc(1, (size_t)size);
		s[i].cq = ibv_create_cq(ctx, 32, NULL, NULL, 0);
		if (!s[i].buf || !s[i].cq)
			die("ibv_create_cq");
		s[i].mr = ibv_reg_mr(pd, s[i].buf, (size_t)size, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
		qa.send_cq = qa.recv_cq = s[i].cq;
		s[i].qp = ibv_create_qp(pd, &qa);
		if (!s[i].mr || !s[i].qp)
			die("ibv_create_qp");
	}
	s[0].peer = &s[1];
	s[1].peer = &s[0];
	connect_qp(s[0].qp, s[1].qp->qp_num, &gid, port.active_mtu);
	connect_qp(s[1].qp, s[0].qp->qp_num, &gid, port.active_mtu);
	s[0].rtt = calloc((size_t)(iters + warm), sizeof(uint64_t));
	post_recv(&s[0]);
	post_recv(&s[1]);
	if (one_thread) {
		ping_one_thread(&s[0]);
	} else {
		if (pthread_create(&th, NULL, pong, &s[1]))
			die("pthread_create");
		ping(&s[0]);
		pthread_join(th, NULL);
	}
	qsort(s[0].rtt + warm, (size_t)iters, sizeof(uint64_t), cmp_u64);
	printf("pingpong %d B in-process%s (%s): half round trip p50 %.2f us  p99 %.2f us  (round trip p50 %.2f us)\n",
	       size, one_thread ? ", one thread" : "", size > SEND_MAX ? "write with immediate" : "send", s[0].rtt[warm + iters / 2] / 2000.0, s[0].rtt[warm + iters * 99 / 100] / 2000.0,
	       s[0].rtt[warm + iters / 2] / 1000.0);
	for (int i = 0; i < 2; i++) {
		ibv_destroy_qp(s[i].qp);
		ibv_dereg_mr(s[i].mr);
		ibv_destroy_cq(s[i].cq);
		free(s[i].buf);
	}
	free(s[0].rtt);
	ibv_dealloc_pd(pd);
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	return 0;
}

/* ---- TCP loopback ------------------------------------------------------------------ */
static int tcp(int size, double seconds)
{
	int l = socket(AF_INET, SOCK_STREAM, 0), one = 1, c, pfd[2];
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	uint8_t *buf = malloc((size_t)size);
	uint64_t bytes = 0, t0, t1;
	pid_t pid;

	if (l < 0 || !buf || bind(l, (struct sockaddr *)&a, sizeof(a)) || listen(l, 1) ||
	    getsockname(l, (struct sockaddr *)&a, &len) || pipe(pfd))
		die("tcp listen");
	memset(buf, 0x5a, (size_t)size);
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		/* reader: counts what it got and reports it when the writer closes */
		int s = accept(l, NULL, NULL);
		ssize_t n;

		if (s < 0)
			_exit(1);
		while ((n = read(s, buf, (size_t)size)) > 0)
			bytes += (uint64_t)n;
		if (write(pfd[1], &bytes, sizeof(bytes)) != sizeof(bytes))
			_exit(1);
		_exit(0);
	}
	c = socket(AF_INET, SOCK_STREAM, 0);
	if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof(a)))
		die("tcp connect");
	setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	t0 = now_ns();
	do {
		for (int i = 0; i < 16; i++) {
			size_t off = 0;

			while (off < (size_t)size) {
				ssize_t n = write(c, buf + off, (size_t)size - off);

				if (n <= 0)
					die("tcp write");
				off += (size_t)n;
			}
		}
		t1 = now_ns();
	} while (t1 - t0 < (uint64_t)(seconds * 1e9));
	close(c);
	if (read(pfd[0], &bytes, sizeof(bytes)) != sizeof(bytes))
		die("tcp reader");
	t1 = now_ns();
	waitpid(pid, NULL, 0);
	printf("tcp loopback %d B writes, two processes: %.0f MB/s\n", size, bytes * 1e3 / (double)(t1 - t0));
	return 0;
}

/* ---- rdma_cm connection rate ------------------------------------------------------------ */
static struct rdma_cm_event *next_event(struct rdma_event_channel *ec)
{
	struct rdma_cm_event *ev;
	struct pollfd p = { .fd = ec->fd, .events = POLLIN };

	if (poll(&p, 1, 30000) != 1) {
		fprintf(stderr, "floor: no rdma_cm event for 30 s\n");
		exit(1);
	}
	if (rdma_get_cm_event(ec, &ev))
		die("rdma_get_cm_event");
	return ev;
}

static struct ibv_qp_init_attr small_qp(struct ibv_cq *cq)
{
	struct ibv_qp_init_attr a = { .send_cq = cq, .recv_cq = cq, .qp_type = IBV_QPT_RC,
				      .cap = { .max_send_wr = 2, .max_recv_wr = 2, .max_send_sge = 1,
					       .max_recv_sge = 1 } };
	return a;
}

static void connect_server(struct rdma_event_channel *ec, int n, int ready_fd)
{
	struct rdma_cm_id *l;
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_ANY) };
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .rnr_retry_count = 7 };
	uint16_t port;
	int est = 0;

	if (rdma_create_id(ec, &l, NULL, RDMA_PS_TCP) || rdma_bind_addr(l, (struct sockaddr *)&sa) ||
	    rdma_listen(l, 1024))
		die("rdma_listen");
	port = rdma_get_src_port(l);
	if (write(ready_fd, &port, sizeof(port)) != sizeof(port))
		die("pipe");
	while (est < n) {
		struct rdma_cm_event *ev = next_event(ec);
		struct rdma_cm_id *id = ev->id;
		enum rdma_cm_event_type t = ev->event;

		rdma_ack_cm_event(ev);
		if (t == RDMA_CM_EVENT_CONNECT_REQUEST) {
			struct ibv_qp_init_attr qa;

			if (!pd) {
				pd = ibv_alloc_pd(id->verbs);
				cq = ibv_create_cq(id->verbs, 64, NULL, NULL, 0);
				if (!pd || !cq)
					die("server pd/cq");
			}
			qa = small_qp(cq);
			if (rdma_create_qp(id, pd, &qa) || rdma_accept(id, &cp))
				die("rdma_accept");
		} else if (t == RDMA_CM_EVENT_ESTABLISHED) {
			est++;
		} else if (t != RDMA_CM_EVENT_DISCONNECTED) {
			fprintf(stderr, "floor: server event %s\n", rdma_event_str(t));
			exit(1);
		}
	}
	/* the client closes everything; its exit ends us */
	for (;;)
		rdma_ack_cm_event(next_event(ec));
}

static int conn_rate(int n, int wave, const char *addr)
{
	int pfd[2];
	uint16_t port;
	pid_t pid;
	struct rdma_event_channel *ec;
	struct rdma_cm_id **ids;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct ibv_pd *pd = NULL;
	struct ibv_cq *cq = NULL;
	struct rdma_conn_param cp = { .responder_resources = 1, .initiator_depth = 1, .retry_count = 7,
				      .rnr_retry_count = 7 };
	uint64_t t0, t1;
	int done = 0;

	if (pipe(pfd))
		die("pipe");
	pid = fork(); /* before any verbs use */
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		ec = rdma_create_event_channel();
		if (!ec)
			die("rdma_create_event_channel");
		connect_server(ec, n, pfd[1]);
		_exit(0);
	}
	if (read(pfd[0], &port, sizeof(port)) != sizeof(port))
		die("server did not start");
	ec = rdma_create_event_channel();
	ids = calloc((size_t)n, sizeof(*ids));
	if (!ec || !ids || inet_pton(AF_INET, addr, &sa.sin_addr) != 1)
		die("client set-up");
	sa.sin_port = port;
	t0 = now_ns();
	for (int base = 0; base < n; base += wave) {
		int m = n - base < wave ? n - base : wave, est = 0;

		for (int i = base; i < base + m; i++) {
			if (rdma_create_id(ec, &ids[i], NULL, RDMA_PS_TCP) ||
			    rdma_resolve_addr(ids[i], NULL, (struct sockaddr *)&sa, 2000))
				die("rdma_resolve_addr");
		}
		while (est < m) {
			struct rdma_cm_event *ev = next_event(ec);
			struct rdma_cm_id *id = ev->id;
			enum rdma_cm_event_type t = ev->event;
			int st = ev->status;

			rdma_ack_cm_event(ev);
			if (t == RDMA_CM_EVENT_ADDR_RESOLVED) {
				if (rdma_resolve_route(id, 2000))
					die("rdma_resolve_route");
			} else if (t == RDMA_CM_EVENT_ROUTE_RESOLVED) {
				struct ibv_qp_init_attr qa;

				if (!pd) {
					pd = ibv_alloc_pd(id->verbs);
					cq = ibv_create_cq(id->verbs, 64, NULL, NULL, 0);
					if (!pd || !cq)
						die("client pd/cq");
				}
				qa = small_qp(cq);
				if (rdma_create_qp(id, pd, &qa) || rdma_connect(id, &cp))
					die("rdma_connect");
			} else if (t == RDMA_CM_EVENT_ESTABLISHED) {
				est++;
			} else {
				fprintf(stderr, "floor: client event %s status %d after %d connections\n",
					rdma_event_str(t), st, done + est);
				exit(1);
			}
		}
		done += m;
	}
	t1 = now_ns();
	printf("rdma_cm connect %d RC connections in waves of %d, two processes: %.0f connections/s (%.2f s)\n",
	       n, wave, n * 1e9 / (double)(t1 - t0), (t1 - t0) / 1e9);
	for (int i = 0; i < n; i++) {
		rdma_disconnect(ids[i]);
		rdma_destroy_qp(ids[i]);
		rdma_destroy_id(ids[i]);
	}
	kill(pid, SIGTERM);
	waitpid(pid, NULL, 0);
	return 0;
}

int main(int argc, char **argv)
{
	int iters = 20000, size = -1, opt, wave = 200, one_thread = 0;
	double seconds = 3;
	const char *addr = "127.0.0.1";

	if (argc < 2) {
		fprintf(stderr, "usage: floor pingpong [-n iters] [-s bytes] [-o] | floor tcp [-s bytes] [-t seconds] |\n"
				"       floor connect [-n conns] [-w wave] [-a addr]\n");
		return 2;
	}
	optind = 2;
	while ((opt = getopt(argc, argv, "n:s:t:w:a:o")) != -1) {
		switch (opt) {
		case 'o': one_thread = 1; break;
		case 'w': wave = atoi(optarg); break;
		case 'a': addr = optarg; break;
		case 'n': iters = atoi(optarg); break;
		case 's': size = atoi(optarg); break;
		case 't': seconds = atof(optarg); break;
		default: return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (!strcmp(argv[1], "pingpong"))
		return pingpong(iters < 10 ? 10 : iters, size < 1 ? 64 : size, one_thread);
	if (!strcmp(argv[1], "tcp"))
		return tcp(size < 1 ? 1 << 20 : size, seconds);
	if (!strcmp(argv[1], "connect"))
		return conn_rate(iters, wave < 1 ? 1 : wave, addr);
	fprintf(stderr, "floor: unknown mode %s\n", argv[1]);
	return 2;
}
