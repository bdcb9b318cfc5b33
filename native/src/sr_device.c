/* SPDX-License-Identifier: Apache-2.0 */
/* Device list, contexts, attribute queries, async events, object counts. */
#define _GNU_SOURCE
#include "sr.h"
#include "sr_util.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>

#undef ibv_get_device_list
#undef ibv_query_port

int sr_debug;
/* the open contexts, for the port events; a port's state changes rarely, so one lock will do */
static pthread_mutex_t contexts_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sr_context *contexts;
atomic_long sr_counts[SR_K_NUM];
static const char *const kind_names[SR_K_NUM] = {
	"context", "pd", "mr", "cq", "comp_channel", "qp", "srq", "cm_id", "cm_channel", "mw",
};

void sr_mutex_init(pthread_mutex_t *m)
{
	pthread_mutexattr_t a;

	pthread_mutexattr_init(&a);
	pthread_mutexattr_settype(&a, PTHREAD_MUTEX_ADAPTIVE_NP);
	pthread_mutex_init(m, &a);
	pthread_mutexattr_destroy(&a);
}

void sr_count(enum sr_kind k, int delta)
{
	atomic_fetch_add(&sr_counts[k], delta);
}

SR_EXPORT long softrdma_object_count(const char *kind)
{
	if (!kind)
		return -1;
	for (int i = 0; i < SR_K_NUM; i++)
		if (!strcmp(kind, kind_names[i]))
			return atomic_load(&sr_counts[i]);
	return -1;
}

static void dump_on_exit(void)
{
	fprintf(stderr, "softrdma[%d]: open objects at exit:", (int)getpid());
	for (int i = 0; i < SR_K_NUM; i++)
		fprintf(stderr, " %s=%ld", kind_names[i], atomic_load(&sr_counts[i]));
	fprintf(stderr, "\n");
}

uint64_t sr_now_ns(void)
{
	return sr_clock_ns();
}

uint64_t sr_random64(void)
{
	return sr_entropy64();
}

/* ---- GID tables: the host's addresses, IPv4 as ::ffff:a.b.c.d (RoCE v2) ---
 * softrdma0 has every address of the host; with SOFTRDMA_DEVICE1_ADDRS a
 * second device, softrdma1, owns the addresses listed there (host addresses,
 * or any of 127.0.0.0/8, which is the host's too) and softrdma0 the rest.
 */
static union ibv_gid gid_table[SR_MAX_DEVICES][SR_MAX_GID];
static int gid_count[SR_MAX_DEVICES];
static union ibv_gid dev1_gids[SR_MAX_GID];
static int dev1_gid_count;
static int dev_count = 1;
static pthread_mutex_t gid_lock = PTHREAD_MUTEX_INITIALIZER;

static bool gid_in(const union ibv_gid *t, int n, const union ibv_gid *g)
{
	for (int i = 0; i < n; i++)
		if (!memcmp(&t[i], g, sizeof(*g)))
			return true;
	return false;
}

static void gid_add(const union ibv_gid *g)
{
	int d = dev_count > 1 && gid_in(dev1_gids, dev1_gid_count, g) ? 1 : 0;

	if (d == 1 || gid_in(gid_table[0], gid_count[0], g))
		return;
	if (gid_count[0] < SR_MAX_GID)
		gid_table[0][gid_count[0]++] = *g;
}

static void gid_refresh(void)
{
	struct ifaddrs *ifa, *p;
	union ibv_gid g;

	pthread_mutex_lock(&gid_lock);
	gid_count[0] = 0;
	/* loopback first so that index 0 always works on one host */
	memset(&g, 0, sizeof(g));
	g.raw[10] = g.raw[11] = 0xff;
	g.raw[12] = 127; g.raw[15] = 1;
	gid_add(&g);
	if (getifaddrs(&ifa) == 0) {
		for (int pass = 0; pass < 2; pass++) {
			for (p = ifa; p; p = p->ifa_next) {
				if (!p->ifa_addr)
					continue;
				memset(&g, 0, sizeof(g));
				if (pass == 0 && p->ifa_addr->sa_family == AF_INET) {
					g.raw[10] = g.raw[11] = 0xff;
					memcpy(&g.raw[12], &((struct sockaddr_in *)p->ifa_addr)->sin_addr, 4);
					gid_add(&g);
				} else if (pass == 1 && p->ifa_addr->sa_family == AF_INET6) {
					memcpy(g.raw, &((struct sockaddr_in6 *)p->ifa_addr)->sin6_addr, 16);
					gid_add(&g);
				}
			}
		}
		freeifaddrs(ifa);
	}
	memset(&g, 0, sizeof(g));
	g.raw[15] = 1;
	gid_add(&g);
	pthread_mutex_unlock(&gid_lock);
}

static bool host_address(const union ibv_gid *g)
{
	static const uint8_t v4[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };
	struct ifaddrs *ifa, *p;
	bool found = false;

	if (!memcmp(g->raw, v4, 12) && g->raw[12] == 127)
		return true;
	if (getifaddrs(&ifa))
		return false;
	for (p = ifa; p && !found; p = p->ifa_next) {
		if (!p->ifa_addr)
			continue;
		if (p->ifa_addr->sa_family == AF_INET)
			found = !memcmp(g->raw, v4, 12) &&
				!memcmp(&g->raw[12], &((struct sockaddr_in *)p->ifa_addr)->sin_addr, 4);
		else if (p->ifa_addr->sa_family == AF_INET6)
			found = !memcmp(g->raw, &((struct sockaddr_in6 *)p->ifa_addr)->sin6_addr, 16);
	}
	freeifaddrs(ifa);
	return found;
}

/* SOFTRDMA_DEVICE1_ADDRS: softrdma1's addresses, separated by commas or spaces; anything else ignored, said so */
static void parse_devices(void)
{
	const char *env = getenv("SOFTRDMA_DEVICE1_ADDRS");
	char buf[1024], *save = NULL, *tok;

	if (!env || !*env)
		return;
	snprintf(buf, sizeof(buf), "%s", env);
	for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
		union ibv_gid g;

		memset(&g, 0, sizeof(g));
		if (inet_pton(AF_INET, tok, &g.raw[12]) == 1)
			g.raw[10] = g.raw[11] = 0xff;
		else if (inet_pton(AF_INET6, tok, g.raw) != 1) {
			fprintf(stderr, "softrdma: SOFTRDMA_DEVICE1_ADDRS: %s is not an address: ignored\n", tok);
			continue;
		}
		if (!host_address(&g)) {
			fprintf(stderr, "softrdma: SOFTRDMA_DEVICE1_ADDRS: %s is no address of this host: ignored\n", tok);
			continue;
		}
		if (dev1_gid_count < SR_MAX_GID && !gid_in(dev1_gids, dev1_gid_count, &g))
			dev1_gids[dev1_gid_count++] = g;
	}
	if (dev1_gid_count) {
		memcpy(gid_table[1], dev1_gids, sizeof(dev1_gids));
		gid_count[1] = dev1_gid_count;
		dev_count = 2;
	}
}

int sr_gid_count(int dev)
{
	return dev >= 0 && dev < dev_count ? gid_count[dev] : 0;
}

int sr_gid_get(int dev, int index, union ibv_gid *gid)
{
	int ret = EINVAL;

	pthread_mutex_lock(&gid_lock);
	if (dev >= 0 && dev < dev_count && index >= 0 && index < gid_count[dev]) {
		*gid = gid_table[dev][index];
		ret = 0;
	}
	pthread_mutex_unlock(&gid_lock);
	return ret;
}

bool sr_gid_is_local(const union ibv_gid *gid)
{
	bool found = false;

	pthread_mutex_lock(&gid_lock);
	for (int d = 0; d < dev_count && !found; d++)
		found = gid_in(gid_table[d], gid_count[d], gid);
	pthread_mutex_unlock(&gid_lock);
	return found;
}

/* the device that owns an address, -1 for none */
static int gid_device(const union ibv_gid *gid)
{
	int d;

	pthread_mutex_lock(&gid_lock);
	for (d = 0; d < dev_count; d++)
		if (gid_in(gid_table[d], gid_count[d], gid))
			break;
	pthread_mutex_unlock(&gid_lock);
	return d < dev_count ? d : -1;
}

/* ---- device list -------------------------------------------------------- */
static struct ibv_device sr_devs[SR_MAX_DEVICES];
static __be64 sr_guid[SR_MAX_DEVICES];
static atomic_bool port_down[SR_MAX_DEVICES];
atomic_int sr_ports_down;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void do_init(void)
{
	struct rlimit rl;
	uint64_t g;

	sr_debug = sr_debug_env();
	if (getenv("SOFTRDMA_DUMP_ON_EXIT") && *getenv("SOFTRDMA_DUMP_ON_EXIT") == '1')
		atexit(dump_on_exit);
	/* one socket per peer instance plus CM sockets: lift the soft fd limit */
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
	parse_devices();
	/* stable per host: derived from the host id, never zero */
	g = (uint64_t)gethostid() * 0x9e3779b97f4a7c15ull ^ 0x5352444d41000000ull;
	g = (g & ~0xffull) | 0x02; /* locally administered */
	for (int d = 0; d < dev_count; d++) {
		struct ibv_device *dev = &sr_devs[d];

		dev->node_type = IBV_NODE_CA;
		dev->transport_type = IBV_TRANSPORT_IB;
		snprintf(dev->name, sizeof(dev->name), "softrdma%d", d);
		snprintf(dev->dev_name, sizeof(dev->dev_name), "uverbs%d", d);
		snprintf(dev->dev_path, sizeof(dev->dev_path), "/sys/class/infiniband_verbs/uverbs%d", d);
		snprintf(dev->ibdev_path, sizeof(dev->ibdev_path), "/sys/class/infiniband/softrdma%d", d);
		sr_guid[d] = htobe64(g + ((uint64_t)d << 8));
	}
	gid_refresh();
}

void sr_init_once(void)
{
	pthread_once(&init_once, do_init);
}

int sr_dev_index(const struct ibv_device *device)
{
	for (int d = 0; d < dev_count; d++)
		if (device == &sr_devs[d])
			return d;
	return -1;
}

bool sr_dev_port_down(int dev)
{
	return dev >= 0 && dev < dev_count && atomic_load(&port_down[dev]);
}

SR_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices)
{
	struct ibv_device **list;

	sr_init_once();
	list = calloc(SR_MAX_DEVICES + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int d = 0; d < dev_count; d++)
		list[d] = &sr_devs[d];
	if (num_devices)
		*num_devices = dev_count;
	return list;
}

SR_EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

SR_EXPORT const char *ibv_get_device_name(struct ibv_device *device)
{
	if (!device) {
		errno = EINVAL;
		return NULL;
	}
	return device->name;
}

SR_EXPORT __be64 ibv_get_device_guid(struct ibv_device *device)
{
	int d;

	sr_init_once();
	d = sr_dev_index(device);
	return sr_guid[d < 0 ? 0 : d];
}

SR_EXPORT int ibv_get_device_index(struct ibv_device *device)
{
	return sr_dev_index(device);
}

/* ---- contexts ----------------------------------------------------------- */
static int sr_query_port_op(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
			    size_t len);
static int sr_query_device_ex_op(struct ibv_context *ctx,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr, size_t attr_size);

static bool is_context(struct ibv_context *ctx)
{
	return ctx && sr_dev_index(ctx->device) >= 0 && ctx->abi_compat == __VERBS_ABI_IS_EXTENDED;
}

struct ibv_context *sr_open(int dev, bool internal)
{
	struct sr_context *c;
	int p[2];

	sr_init_once();
	gid_refresh();
	if (sr_net_start())
		return NULL;
	c = calloc(1, sizeof(*c));
	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	if (pipe2(p, O_CLOEXEC)) {
		free(c);
		return NULL;
	}
	c->vctx.sz = sizeof(struct verbs_context);
	c->vctx.query_port = sr_query_port_op;
	c->vctx.query_device_ex = sr_query_device_ex_op;
	c->vctx.context.device = &sr_devs[dev];
	c->vctx.context.cmd_fd = -1;
	c->vctx.context.async_fd = p[0];
	c->async_wfd = p[1];
	fcntl(p[1], F_SETFL, O_NONBLOCK); /* a full pipe drops the event (never blocks a thread) */
	pthread_mutex_init(&c->async_lock, NULL);
	pthread_cond_init(&c->async_acked, NULL);
	c->vctx.context.num_comp_vectors = 1;
	c->vctx.context.abi_compat = __VERBS_ABI_IS_EXTENDED;
	c->vctx.context.ops.poll_cq = sr_poll_cq;
	c->vctx.context.ops.req_notify_cq = sr_req_notify_cq;
	c->vctx.context.ops.post_send = sr_qp_post_send;
	c->vctx.context.ops.post_recv = sr_qp_post_recv;
	c->vctx.context.ops.post_srq_recv = sr_srq_post_recv;
	c->vctx.context.ops.alloc_mw = sr_alloc_mw;
	c->vctx.context.ops.dealloc_mw = sr_dealloc_mw;
	c->vctx.context.ops.bind_mw = sr_bind_mw;
	pthread_mutex_init(&c->vctx.context.mutex, NULL);
	c->internal = internal;
	if (!internal)
		sr_count(SR_K_CONTEXT, 1);
	pthread_mutex_lock(&contexts_lock);
	c->next = contexts;
	contexts = c;
	pthread_mutex_unlock(&contexts_lock);
	sr_dbg("open_device -> context %p", (void *)&c->vctx.context);
	return &c->vctx.context;
}

SR_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device)
{
	int d = sr_dev_index(device);

	if (d < 0) {
		errno = device ? ENODEV : EINVAL;
		return NULL;
	}
	return sr_open(d, false);
}

SR_EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct sr_context *c;

	if (!is_context(ctx))
		return EINVAL;
	c = (struct sr_context *)((char *)ctx - offsetof(struct verbs_context, context));
	pthread_mutex_lock(&contexts_lock);
	for (struct sr_context **pp = &contexts; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	ctx->abi_compat = NULL;
	pthread_mutex_unlock(&contexts_lock);
	while (c->async_head) {
		struct sr_async_rec *r = c->async_head;

		c->async_head = r->next;
		free(r);
	}
	pthread_mutex_destroy(&c->async_lock);
	pthread_cond_destroy(&c->async_acked);
	close(ctx->async_fd);
	close(c->async_wfd);
	pthread_mutex_destroy(&ctx->mutex);
	if (!c->internal)
		sr_count(SR_K_CONTEXT, -1);
	free(c);
	return 0;
}

/* ---- queries ------------------------------------------------------------ */
static void fill_device_attr(struct ibv_device_attr *a, int dev)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "1.0.0");
	a->node_guid = sr_guid[dev];
	a->sys_image_guid = sr_guid[dev];
	a->max_mr_size = UINT64_MAX;
	a->page_size_cap = 0xfffff000;
	a->vendor_id = SR_VENDOR_ID;
	a->vendor_part_id = SR_VENDOR_PART_ID;
	a->hw_ver = 0;
	a->max_qp = SR_MAX_QP;
	a->max_qp_wr = SR_MAX_QP_WR;
	a->device_cap_flags = IBV_DEVICE_BAD_PKEY_CNTR | IBV_DEVICE_BAD_QKEY_CNTR |
			      IBV_DEVICE_CHANGE_PHY_PORT | IBV_DEVICE_SYS_IMAGE_GUID |
			      IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_SRQ_RESIZE |
			      IBV_DEVICE_MEM_WINDOW | IBV_DEVICE_MEM_WINDOW_TYPE_2B; /* as rxe */
	a->max_sge = SR_MAX_SGE;
	a->max_sge_rd = SR_MAX_SGE;
	a->max_cq = SR_MAX_CQ;
	a->max_cqe = SR_MAX_CQE;
	a->max_mr = SR_MAX_MR;
	a->max_pd = SR_MAX_PD;
	a->max_qp_rd_atom = SR_MAX_RD_ATOM;
	a->max_ee_rd_atom = 0;
	a->max_res_rd_atom = SR_MAX_RD_ATOM * SR_MAX_QP;
	a->max_qp_init_rd_atom = SR_MAX_RD_ATOM;
	a->atomic_cap = IBV_ATOMIC_HCA;
	a->max_mw = SR_MAX_MW;
	a->max_srq = SR_MAX_SRQ;
	a->max_srq_wr = SR_MAX_SRQ_WR;
	a->max_srq_sge = SR_MAX_SRQ_SGE;
	a->max_pkeys = 1;
	a->local_ca_ack_delay = 15;
	a->phys_port_cnt = 1;
}

SR_EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *attr)
{
	if (!is_context(ctx) || !attr)
		return EINVAL;
	fill_device_attr(attr, sr_dev_index(ctx->device));
	return 0;
}

static int sr_query_device_ex_op(struct ibv_context *ctx,
				 const struct ibv_query_device_ex_input *input,
				 struct ibv_device_attr_ex *attr, size_t attr_size)
{
	struct ibv_device_attr_ex ex;

	(void)input;
	if (!is_context(ctx) || !attr || attr_size < sizeof(struct ibv_device_attr))
		return EINVAL;
	memset(&ex, 0, sizeof(ex));
	fill_device_attr(&ex.orig_attr, sr_dev_index(ctx->device));
	ex.device_cap_flags_ex = ex.orig_attr.device_cap_flags;
	ex.max_dm_size = 0;
	if (attr_size > sizeof(ex))
		attr_size = sizeof(ex);
	memcpy(attr, &ex, attr_size);
	return 0;
}

static void fill_port_attr(struct ibv_port_attr *a, int dev)
{
	bool down = sr_dev_port_down(dev);

	memset(a, 0, sizeof(*a));
	a->state = down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = IBV_MTU_4096;
	a->gid_tbl_len = sr_gid_count(dev);
	a->port_cap_flags = IBV_PORT_CM_SUP | IBV_PORT_IP_BASED_GIDS;
	a->max_msg_sz = SR_MAX_MSG_SZ;
	a->bad_pkey_cntr = 0;
	a->qkey_viol_cntr = 0;
	a->pkey_tbl_len = 1;
	a->lid = 0;
	a->sm_lid = 0;
	a->lmc = 0;
	a->max_vl_num = 1;
	a->sm_sl = 0;
	a->subnet_timeout = 0;
	a->init_type_reply = 0;
	a->active_width = 2;  /* 4x */
	a->active_speed = 32; /* 25 Gb/s (EDR) per lane */
	a->phys_state = down ? 3 : 5; /* Disabled (as rxe's netdev down) / LinkUp */
	a->link_layer = IBV_LINK_LAYER_ETHERNET;
}

static int sr_query_port_op(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr,
			    size_t len)
{
	struct ibv_port_attr a;

	if (!is_context(ctx) || !attr)
		return EINVAL;
	if (port != 1)
		return EINVAL;
	fill_port_attr(&a, sr_dev_index(ctx->device));
	memcpy(attr, &a, len < sizeof(a) ? len : sizeof(a));
	return 0;
}

/*
 * The exported symbol takes the old, shorter layout (rdma-core's struct
 * _compat_ibv_port_attr ends with link_layer and flags, before port_cap_flags2).
 */
SR_EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port, struct _compat_ibv_port_attr *attr)
{
	return sr_query_port_op(ctx, port, (struct ibv_port_attr *)attr,
				offsetof(struct ibv_port_attr, port_cap_flags2));
}

SR_EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid)
{
	if (!is_context(ctx) || port != 1 || !gid)
		return -1;
	if (sr_gid_get(sr_dev_index(ctx->device), index, gid)) {
		errno = EINVAL;
		return -1;
	}
	return 0;
}

SR_EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t index,
				struct ibv_gid_entry *entry, uint32_t flags, size_t entry_size)
{
	struct ibv_gid_entry e;

	if (!is_context(ctx) || port != 1 || !entry || flags)
		return EINVAL;
	memset(&e, 0, sizeof(e));
	if (sr_gid_get(sr_dev_index(ctx->device), (int)index, &e.gid))
		return ENODATA;
	e.gid_index = index;
	e.port_num = port;
	e.gid_type = IBV_GID_TYPE_ROCE_V2;
	e.ndev_ifindex = 1;
	memcpy(entry, &e, entry_size < sizeof(e) ? entry_size : sizeof(e));
	return 0;
}

SR_EXPORT ssize_t _ibv_query_gid_table(struct ibv_context *ctx, struct ibv_gid_entry *entries,
				       size_t max_entries, uint32_t flags, size_t entry_size)
{
	size_t n = 0;

	if (!is_context(ctx) || (!entries && max_entries) || flags || entry_size < sizeof(*entries))
		return -EINVAL;
	for (int i = 0; i < sr_gid_count(sr_dev_index(ctx->device)) && n < max_entries; i++, n++)
		if (_ibv_query_gid_ex(ctx, 1, (uint32_t)i,
				      (struct ibv_gid_entry *)((char *)entries + n * entry_size), 0,
				      entry_size))
			break;
	return (ssize_t)n;
}

/* enum ibv_gid_type_sysfs from rdma-core's driver.h: 0 IB/RoCE v1, 1 RoCE v2 */
SR_EXPORT int ibv_query_gid_type(struct ibv_context *ctx, uint8_t port, unsigned int index,
				 int *type)
{
	union ibv_gid g;

	if (!is_context(ctx) || port != 1 || !type || sr_gid_get(sr_dev_index(ctx->device), (int)index, &g)) {
		errno = EINVAL;
		return -1;
	}
	*type = 1;
	return 0;
}

SR_EXPORT int ibv_query_pkey(struct ibv_context *ctx, uint8_t port, int index, __be16 *pkey)
{
	if (!is_context(ctx) || port != 1 || index != 0 || !pkey) {
		errno = EINVAL;
		return -1;
	}
	*pkey = htobe16(0xffff);
	return 0;
}

SR_EXPORT int ibv_get_pkey_index(struct ibv_context *ctx, uint8_t port, __be16 pkey)
{
	if (!is_context(ctx) || port != 1)
		return -EINVAL;
	return be16toh(pkey) == 0xffff ? 0 : -ENOENT;
}

/* ---- async events ------------------------------------------------------- */
/*
 * Queued in the context; the pipe carries one byte per queued record, read
 * only under async_lock together with the record, so async_fd is readable
 * exactly while an event is queued. Affiliated events are counted on their
 * object: as ibv_get_async_event(3) says, "destroying an object (CQ, SRQ or
 * QP) will wait for all affiliated events for the object to be
 * acknowledged", and (as the kernel's uverbs) its unread events go with it.
 */
static struct sr_context *sr_ctx(struct ibv_context *ctx)
{
	return (struct sr_context *)((char *)ctx - offsetof(struct verbs_context, context));
}

/* the counters of an affiliated event's object; NULL for port and device events */
static uint32_t *async_counters(int type, void *element, uint32_t **acked)
{
	switch (type) {
	case IBV_EVENT_CQ_ERR: {
		struct sr_cq *cq = element;

		*acked = &cq->async_acked;
		return &cq->async_reported;
	}
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED: {
		struct sr_srq *srq = element;

		*acked = &srq->async_acked;
		return &srq->async_reported;
	}
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
	case IBV_EVENT_DEVICE_FATAL:
		return NULL;
	default: {
		struct sr_qp *qp = element;

		*acked = &qp->async_acked;
		return &qp->async_reported;
	}
	}
}

void sr_async_event(struct ibv_context *ctx, enum ibv_event_type type, void *element)
{
	struct sr_context *c;
	struct sr_async_rec *r;
	char b = 0;

	if (!is_context(ctx))
		return;
	c = sr_ctx(ctx);
	r = calloc(1, sizeof(*r));
	if (!r) {
		sr_dbg("async event dropped");
		return;
	}
	r->element = element;
	r->type = type;
	sr_dbg("async event %s", ibv_event_type_str(type));
	pthread_mutex_lock(&c->async_lock);
	if (write(c->async_wfd, &b, 1) != 1) {
		pthread_mutex_unlock(&c->async_lock);
		free(r);
		sr_dbg("async event dropped");
		return;
	}
	if (c->async_tail)
		c->async_tail->next = r;
	else
		c->async_head = r;
	c->async_tail = r;
	pthread_mutex_unlock(&c->async_lock);
}

/* object destroy: drop its unread events, wait for the acks of those returned */
void sr_async_forget(struct ibv_context *ctx, void *element, uint32_t *reported, const uint32_t *acked)
{
	struct sr_context *c;
	struct sr_async_rec **pp, *r;

	if (!is_context(ctx))
		return;
	c = sr_ctx(ctx);
	pthread_mutex_lock(&c->async_lock);
	for (pp = &c->async_head; (r = *pp);) {
		if (r->element == element) {
			char b;

			*pp = r->next;
			if (read(ctx->async_fd, &b, 1) != 1)
				sr_dbg("async queue out of step");
			free(r);
		} else {
			pp = &r->next;
		}
	}
	c->async_tail = NULL;
	for (r = c->async_head; r; r = r->next)
		c->async_tail = r;
	while (*acked != *reported)
		pthread_cond_wait(&c->async_acked, &c->async_lock);
	pthread_mutex_unlock(&c->async_lock);
}

SR_EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *event)
{
	struct sr_context *c;
	struct sr_async_rec *r;

	if (!is_context(ctx) || !event) {
		errno = EINVAL;
		return -1;
	}
	c = sr_ctx(ctx);
	for (;;) {
		struct pollfd pfd = { .fd = ctx->async_fd, .events = POLLIN };
		int fl = fcntl(ctx->async_fd, F_GETFL);

		/* blocking unless the caller made async_fd non-blocking */
		if (fl < 0 || (!(fl & O_NONBLOCK) && poll(&pfd, 1, -1) < 0))
			return -1;
		pthread_mutex_lock(&c->async_lock);
		r = c->async_head;
		if (r) {
			uint32_t *acked, *rep;
			char b;

			if (read(ctx->async_fd, &b, 1) != 1)
				sr_dbg("async queue out of step");
			c->async_head = r->next;
			if (!c->async_head)
				c->async_tail = NULL;
			rep = async_counters(r->type, r->element, &acked);
			if (rep)
				(*rep)++;
		}
		pthread_mutex_unlock(&c->async_lock);
		if (r)
			break;
		if (fl & O_NONBLOCK) {
			errno = EAGAIN;
			return -1;
		}
	}
	event->event_type = r->type;
	switch (r->type) {
	case IBV_EVENT_CQ_ERR:
		event->element.cq = r->element;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		event->element.srq = r->element;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_DEVICE_FATAL:
		event->element.port_num = 1;
		break;
	default:
		event->element.qp = r->element;
		break;
	}
	free(r);
	return 0;
}

SR_EXPORT void ibv_ack_async_event(struct ibv_async_event *event)
{
	struct ibv_context *ctx;
	uint32_t *acked;
	void *el;
	struct sr_context *c;

	if (!event)
		return;
	switch (event->event_type) {
	case IBV_EVENT_CQ_ERR:
		el = event->element.cq;
		ctx = el ? event->element.cq->context : NULL;
		break;
	case IBV_EVENT_SRQ_ERR:
	case IBV_EVENT_SRQ_LIMIT_REACHED:
		el = event->element.srq;
		ctx = el ? event->element.srq->context : NULL;
		break;
	case IBV_EVENT_PORT_ACTIVE:
	case IBV_EVENT_PORT_ERR:
	case IBV_EVENT_LID_CHANGE:
	case IBV_EVENT_PKEY_CHANGE:
	case IBV_EVENT_SM_CHANGE:
	case IBV_EVENT_CLIENT_REREGISTER:
	case IBV_EVENT_GID_CHANGE:
	case IBV_EVENT_DEVICE_FATAL:
		return; /* not affiliated with an object */
	default:
		el = event->element.qp;
		ctx = el ? event->element.qp->context : NULL;
		break;
	}
	if (!el || !is_context(ctx) || !async_counters(event->event_type, el, &acked))
		return;
	c = sr_ctx(ctx);
	pthread_mutex_lock(&c->async_lock);
	(*acked)++;
	pthread_cond_broadcast(&c->async_acked);
	pthread_mutex_unlock(&c->async_lock);
}

SR_EXPORT int ibv_fork_init(void)
{
	return 0;
}

SR_EXPORT enum ibv_fork_status ibv_is_fork_initialized(void)
{
	return IBV_FORK_UNNEEDED;
}

/* sysfs does not describe this device: callers get "no such file" */
SR_EXPORT int ibv_read_sysfs_file(const char *dir, const char *file, char *buf, size_t size)
{
	(void)dir; (void)file; (void)buf; (void)size;
	errno = ENOENT;
	return -1;
}

SR_EXPORT const char *ibv_get_sysfs_path(void)
{
	return "/sys";
}

/* ---- for librdmacm.so.1 ----------------------------------------------------- */
/* the CM's own context: same device, same objects, not counted as the user's */
SR_EXPORT struct ibv_context *softrdma_internal_open(int dev)
{
	sr_init_once();
	if (dev < 0 || dev >= dev_count) {
		errno = ENODEV;
		return NULL;
	}
	return sr_open(dev, true);
}

SR_EXPORT void softrdma_internal_count(int kind, int delta)
{
	if (kind == SR_K_CM_ID || kind == SR_K_CM_CHANNEL)
		sr_count(kind, delta);
}

/* ---- the port's state (a test hook) ----------------------------------------- */
/*
 * As kernel rxe on its netdev's down and up (rxe_port_down / rxe_port_up): the
 * port's state changes and IBV_EVENT_PORT_ERR / IBV_EVENT_PORT_ACTIVE is queued
 * on every open context of the device. The queue pairs are not moved to the
 * error state by the event: their packets are lost while the port is down, so
 * their retries run out (IBV_WC_RETRY_EXC_ERR) unless the port comes back first.
 * The state is this process's: the device lives in each process.
 */
SR_EXPORT int softrdma_set_port_state(const char *device, unsigned int port, int up)
{
	bool down = !up;
	int d = -1;

	sr_init_once();
	for (int i = 0; device && i < dev_count; i++)
		if (!strcmp(device, sr_devs[i].name))
			d = i;
	if (d < 0 || port != 1) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&contexts_lock);
	if (atomic_exchange(&port_down[d], down) != down) {
		atomic_fetch_add(&sr_ports_down, down ? 1 : -1);
		sr_dbg("port %u of %s: %s", port, device, down ? "DOWN" : "ACTIVE");
		/* librdmacm's own contexts too: its ids' users read id->verbs's async fd */
		for (struct sr_context *c = contexts; c; c = c->next)
			if (c->vctx.context.device == &sr_devs[d])
				sr_async_event(&c->vctx.context, down ? IBV_EVENT_PORT_ERR : IBV_EVENT_PORT_ACTIVE,
					       NULL);
	}
	pthread_mutex_unlock(&contexts_lock);
	return 0;
}

/*
 * The same from another process: a file <SOFTRDMA_RUNDIR>/<device>-port1-down takes port 1 of that device down in
 * every process of the registry directory (they share the link, as the hosts on one switch), its removal brings it
 * back. The progress thread looks at most every 100 ms and acts on a change only, so the hook above still works.
 */
void sr_port_files_check(uint64_t now)
{
	static uint64_t next;
	static bool seen[SR_MAX_DEVICES];
	const char *run = softrdma_internal_rundir();
	char path[512];
	struct stat st;

	if (now < next || !run)
		return;
	next = now + 100000000ull;
	for (int d = 0; d < dev_count; d++) {
		bool exists;

		snprintf(path, sizeof(path), "%s/%s-port1-down", run, sr_devs[d].name);
		exists = lstat(path, &st) == 0;
		if (exists != seen[d]) {
			seen[d] = exists;
			softrdma_set_port_state(sr_devs[d].name, 1, !exists);
		}
	}
}

/* ---- for librdmacm.so.1: its devices ---------------------------------------- */
SR_EXPORT int softrdma_internal_device_count(void)
{
	sr_init_once();
	return dev_count;
}

/* the device whose address sa is (AF_INET / AF_INET6), else 0: the one with every other address */
SR_EXPORT int softrdma_internal_device_of(const struct sockaddr *sa)
{
	union ibv_gid g;
	int d;

	sr_init_once();
	memset(&g, 0, sizeof(g));
	if (sa->sa_family == AF_INET) {
		g.raw[10] = g.raw[11] = 0xff;
		memcpy(&g.raw[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else if (sa->sa_family == AF_INET6) {
		memcpy(g.raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	} else {
		return 0;
	}
	d = gid_device(&g);
	return d < 0 ? 0 : d;
}

SR_EXPORT int softrdma_internal_port_down(struct ibv_context *ctx)
{
	return ctx && sr_dev_port_down(sr_dev_index(ctx->device));
}
