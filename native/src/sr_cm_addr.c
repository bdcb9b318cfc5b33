/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdmacm for softrdma0: addresses (bind, resolve, listen, ports, the
 * device list) and rdma_getaddrinfo. Ports are RDMA ports (sr_cm_ports.c);
 * the TCP sockets underneath have TCP ports of their own.
 */
#define _GNU_SOURCE
#include "sr_cm_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>

/* ---- addresses ---------------------------------------------------------------- */
socklen_t sa_len(const struct sockaddr *sa)
{
	return sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

bool sa_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
}

uint16_t sa_port(const struct sockaddr *sa)
{
	return ntohs(sa->sa_family == AF_INET6 ? ((const struct sockaddr_in6 *)sa)->sin6_port :
						 ((const struct sockaddr_in *)sa)->sin_port);
}

void sa_set_port(struct sockaddr *sa, uint16_t port)
{
	if (sa->sa_family == AF_INET6)
		((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
	else
		((struct sockaddr_in *)sa)->sin_port = htons(port);
}

void sa_to_gid(const struct sockaddr *sa, union ibv_gid *gid)
{
	memset(gid, 0, sizeof(*gid));
	if (sa->sa_family == AF_INET) {
		gid->raw[10] = gid->raw[11] = 0xff;
		memcpy(&gid->raw[12], &((const struct sockaddr_in *)sa)->sin_addr, 4);
	} else {
		memcpy(gid->raw, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
	}
}

struct ibv_context *cm_ctx_of(const struct sockaddr *sa)
{
	return cm_ctxs[softrdma_internal_device_of(sa) % cm_ndev];
}

int gid_index_of(struct ibv_context *ctx, const union ibv_gid *gid)
{
	union ibv_gid g;

	for (int i = 0; ibv_query_gid(ctx, 1, i, &g) == 0; i++)
		if (!memcmp(&g, gid, sizeof(g)))
			return i;
	return 0;
}

/*
 * cm_lock held: the TCP socket underneath an id, on addr's address. Its TCP
 * port is left to listen() or connect() (IP_BIND_ADDRESS_NO_PORT): the id's
 * port is an RDMA port (sr_cm_ports.c), and an explicit bind to TCP port 0
 * would make the kernel check the new port against every socket bound on the
 * address (O(n): with 10 000 connections open it was most of the set-up time).
 */
static int bind_socket(struct cm_id *c, const struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int fd, one = 1;

	if (addr->sa_family != AF_INET && addr->sa_family != AF_INET6) {
		errno = EAFNOSUPPORT;
		return -1;
	}
	fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (addr->sa_family == AF_INET6) {
		int v6only = c->afonly;

		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	}
	memcpy(&ss, addr, sa_len(addr));
	sa_set_port((struct sockaddr *)&ss, 0);
	if (bind(fd, (struct sockaddr *)&ss, sa_len(addr)) || getsockname(fd, (struct sockaddr *)&ss, &len)) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	memcpy(&c->id.route.addr.src_storage, &ss, len);
	return 0;
}

/* cm_lock held: the socket underneath and the RDMA port `port` (0: a free one) */
static int bind_claim(struct cm_id *c, const struct sockaddr *addr, uint16_t port)
{
	if (bind_socket(c, addr))
		return -1;
	if (port_bind(c, port)) {
		int e = errno;

		id_close_fd(c);
		errno = e;
		return -1;
	}
	return 0;
}

SR_EXPORT int rdma_bind_addr(struct rdma_cm_id *id, struct sockaddr *addr)
{
	struct cm_id *c = to_id(id);
	int ret;

	if (!c || !addr) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_IDLE || (addr->sa_family != AF_INET && addr->sa_family != AF_INET6)) {
		errno = c->state != CMS_IDLE ? EINVAL : EAFNOSUPPORT;
		pthread_mutex_unlock(&cm_lock);
		return -1;
	}
	ret = bind_claim(c, addr, sa_port(addr));
	if (!ret) {
		set_state(c, CMS_BOUND);
		/* a specific address belongs to the device; the wildcard to none yet */
		if (!sa_is_any(addr))
			c->id.verbs = cm_ctx_of(addr);
		c->id.port_num = 1;
	}
	pthread_mutex_unlock(&cm_lock);
	return ret;
}

/* nothing of this machine can own addr (bind refuses it): no softrdma instance listens there */
static bool addr_is_local(const struct sockaddr *addr)
{
	struct sockaddr_storage ss;
	int fd = socket(addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	bool local;

	if (fd < 0)
		return true;
	memcpy(&ss, addr, sa_len(addr));
	sa_set_port((struct sockaddr *)&ss, 0);
	local = !bind(fd, (struct sockaddr *)&ss, sa_len(addr)) || errno != EADDRNOTAVAIL;
	close(fd);
	return local;
}

/*
 * cm_lock held, for rdma_connect: start the CM connection to the listener on
 * the destination's address and RDMA port, which is the TCP listening socket
 * its claim names; 0 or -1 and errno as connect() (EINPROGRESS: under way).
 * Nobody listening: ECONNREFUSED at once for an address of this machine, as
 * today's callers expect; an address elsewhere has no softrdma instance, and
 * the connect times out as a REQ that nobody answers (the socket is closed).
 */
int connect_listener(struct cm_id *c)
{
	const struct sockaddr *dst = &c->id.route.addr.dst_addr;
	struct sockaddr_storage to;
	uint16_t tcp_port;

	if (port_lookup(c->id.ps, dst, &tcp_port)) {
		if (errno != ENOENT)
			return -1;
		cm_dbg("id %p: nothing listens on RDMA port %u", (void *)c, sa_port(dst));
		if (addr_is_local(dst)) {
			errno = ECONNREFUSED;
			return -1;
		}
		id_close_fd(c);
		errno = EINPROGRESS;
		return -1;
	}
	memcpy(&to, dst, sa_len(dst));
	sa_set_port((struct sockaddr *)&to, tcp_port);
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	return connect(c->fd, (struct sockaddr *)&to, sa_len(dst));
}

SR_EXPORT int rdma_resolve_addr(struct rdma_cm_id *id, struct sockaddr *src_addr,
				struct sockaddr *dst_addr, int timeout_ms)
{
	struct cm_id *c = to_id(id);
	struct sockaddr_storage src;
	socklen_t len = sizeof(src);
	int fd, ok;

	(void)timeout_ms;
	if (!c || !dst_addr || (dst_addr->sa_family != AF_INET && dst_addr->sa_family != AF_INET6)) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_IDLE && c->state != CMS_BOUND) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	memcpy(&c->id.route.addr.dst_storage, dst_addr, sa_len(dst_addr));
	/* the route the kernel would take tells the source address */
	fd = socket(dst_addr->sa_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
	ok = fd >= 0 && !connect(fd, dst_addr, sa_len(dst_addr)) &&
	     !getsockname(fd, (struct sockaddr *)&src, &len);
	if (fd >= 0)
		close(fd);
	if (ok && c->state == CMS_IDLE) {
		if (src_addr && src_addr->sa_family == dst_addr->sa_family) {
			memcpy(&src, src_addr, sa_len(src_addr));
		} else if (src.ss_family == AF_INET) {
			((struct sockaddr_in *)&src)->sin_port = 0;
		} else {
			((struct sockaddr_in6 *)&src)->sin6_port = 0;
		}
		/* a source port given is claimed; else the CM connection's port is the id's */
		ok = sa_port((struct sockaddr *)&src) ?
			     !bind_claim(c, (struct sockaddr *)&src, sa_port((struct sockaddr *)&src)) :
			     !bind_socket(c, (struct sockaddr *)&src);
	}
	/* a bound id's device is its address's */
	if (ok && c->state == CMS_BOUND && !sa_is_any(&c->id.route.addr.src_addr))
		memcpy(&src, &c->id.route.addr.src_storage, sa_len(&c->id.route.addr.src_addr));
	/* a port that is down has no route (the kernel's, after ip link set <netdev> down) */
	if (ok && softrdma_internal_port_down(cm_ctx_of((struct sockaddr *)&src))) {
		errno = ENETUNREACH;
		ok = 0;
	}
	set_state(c, CMS_ADDR_QUERY);
	if (ok) {
		c->id.verbs = cm_ctx_of((struct sockaddr *)&src);
		c->id.port_num = 1;
		set_state(c, CMS_ADDR_RESOLVED);
		queue_event(c, RDMA_CM_EVENT_ADDR_RESOLVED, 0, NULL, NULL, 0);
	} else {
		set_state(c, CMS_IDLE);
		queue_event(c, RDMA_CM_EVENT_ADDR_ERROR, -(errno ? errno : EHOSTUNREACH), NULL, NULL, 0);
	}
	pthread_mutex_unlock(&cm_lock);
	return sync_wait(c, RDMA_CM_EVENT_ADDR_RESOLVED);
}

SR_EXPORT int rdma_resolve_route(struct rdma_cm_id *id, int timeout_ms)
{
	struct cm_id *c = to_id(id);

	(void)timeout_ms;
	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state != CMS_ADDR_RESOLVED) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	set_state(c, CMS_ROUTE_RESOLVED);
	queue_event(c, RDMA_CM_EVENT_ROUTE_RESOLVED, 0, NULL, NULL, 0);
	pthread_mutex_unlock(&cm_lock);
	return sync_wait(c, RDMA_CM_EVENT_ROUTE_RESOLVED);
}

SR_EXPORT int rdma_listen(struct rdma_cm_id *id, int backlog)
{
	struct cm_id *c = to_id(id);
	struct epoll_event ev = { .events = EPOLLIN };

	if (!c) {
		errno = EINVAL;
		return -1;
	}
	pthread_mutex_lock(&cm_lock);
	if (c->state == CMS_IDLE) {
		struct sockaddr_in any = { .sin_family = AF_INET };

		if (bind_claim(c, (struct sockaddr *)&any, 0)) {
			pthread_mutex_unlock(&cm_lock);
			return -1;
		}
		set_state(c, CMS_BOUND);
	}
	if (c->state != CMS_BOUND || port_listen(c, backlog > 0 ? backlog : 128)) {
		pthread_mutex_unlock(&cm_lock);
		errno = c->state != CMS_BOUND ? EINVAL : errno;
		return -1;
	}
	fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
	ev.data.u64 = c->serial;
	epoll_ctl(cm_ep, EPOLL_CTL_ADD, c->fd, &ev);
	c->in_epoll = true;
	set_state(c, CMS_LISTEN);
	pthread_mutex_unlock(&cm_lock);
	return 0;
}

/* RDMA ports, in network order as librdmacm returns them */
SR_EXPORT uint16_t rdma_get_src_port(struct rdma_cm_id *id)
{
	return id ? htons(sa_port(&id->route.addr.src_addr)) : 0;
}

SR_EXPORT uint16_t rdma_get_dst_port(struct rdma_cm_id *id)
{
	return id ? htons(sa_port(&id->route.addr.dst_addr)) : 0;
}

SR_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;

	if (cm_start())
		return NULL;
	list = calloc(cm_ndev + 1, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	for (int d = 0; d < cm_ndev; d++)
		list[d] = cm_ctxs[d];
	if (num_devices)
		*num_devices = cm_ndev;
	return list;
}

SR_EXPORT void rdma_free_devices(struct ibv_context **list)
{
	free(list);
}

/* ---- rdma_getaddrinfo ---------------------------------------------------------- */
SR_EXPORT int rdma_getaddrinfo(const char *node, const char *service,
			       const struct rdma_addrinfo *hints, struct rdma_addrinfo **res)
{
	struct addrinfo ah, *ai;
	struct rdma_addrinfo *r;
	int ret;

	if (!res || (!node && !service)) {
		errno = EINVAL;
		return -1;
	}
	if (cm_start())
		return -1;
	memset(&ah, 0, sizeof(ah));
	ah.ai_socktype = SOCK_STREAM;
	if (hints) {
		if (hints->ai_flags & RAI_PASSIVE)
			ah.ai_flags |= AI_PASSIVE;
		if (hints->ai_flags & RAI_NUMERICHOST)
			ah.ai_flags |= AI_NUMERICHOST;
		if (hints->ai_family == AF_INET || hints->ai_family == AF_INET6)
			ah.ai_family = hints->ai_family;
	}
	ret = getaddrinfo(node, service, &ah, &ai);
	if (ret)
		return ret;
	r = calloc(1, sizeof(*r));
	if (!r) {
		freeaddrinfo(ai);
		errno = ENOMEM;
		return -1;
	}
	r->ai_flags = hints ? hints->ai_flags : 0;
	r->ai_family = ai->ai_family;
	r->ai_qp_type = hints && hints->ai_qp_type ? hints->ai_qp_type : IBV_QPT_RC;
	r->ai_port_space = hints && hints->ai_port_space ? hints->ai_port_space : RDMA_PS_TCP;
	if (r->ai_flags & RAI_PASSIVE) {
		r->ai_src_addr = malloc(ai->ai_addrlen);
		if (r->ai_src_addr)
			memcpy(r->ai_src_addr, ai->ai_addr, ai->ai_addrlen);
		r->ai_src_len = ai->ai_addrlen;
	} else {
		r->ai_dst_addr = malloc(ai->ai_addrlen);
		if (r->ai_dst_addr)
			memcpy(r->ai_dst_addr, ai->ai_addr, ai->ai_addrlen);
		r->ai_dst_len = ai->ai_addrlen;
		if (hints && hints->ai_src_addr && hints->ai_src_len) {
			r->ai_src_addr = malloc(hints->ai_src_len);
			if (r->ai_src_addr)
				memcpy(r->ai_src_addr, hints->ai_src_addr, hints->ai_src_len);
			r->ai_src_len = hints->ai_src_len;
		}
	}
	freeaddrinfo(ai);
	if ((r->ai_flags & RAI_PASSIVE) ? !r->ai_src_addr : !r->ai_dst_addr) {
		rdma_freeaddrinfo(r);
		errno = ENOMEM;
		return -1;
	}
	*res = r;
	return 0;
}

SR_EXPORT void rdma_freeaddrinfo(struct rdma_addrinfo *res)
{
	while (res) {
		struct rdma_addrinfo *next = res->ai_next;

		free(res->ai_src_addr);
		free(res->ai_dst_addr);
		free(res->ai_src_canonname);
		free(res->ai_dst_canonname);
		free(res->ai_route);
		free(res->ai_connect);
		free(res);
		res = next;
	}
}
