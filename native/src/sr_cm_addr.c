/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdmacm for softrdma0: addresses (bind, resolve, listen, ports, the
 * device list) and rdma_getaddrinfo.
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

static bool sa_is_any(const struct sockaddr *sa)
{
	if (sa->sa_family == AF_INET)
		return ((const struct sockaddr_in *)sa)->sin_addr.s_addr == htonl(INADDR_ANY);
	return IN6_IS_ADDR_UNSPECIFIED(&((const struct sockaddr_in6 *)sa)->sin6_addr);
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

int gid_index_of(const union ibv_gid *gid)
{
	union ibv_gid g;

	for (int i = 0; ibv_query_gid(cm_ctx, 1, i, &g) == 0; i++)
		if (!memcmp(&g, gid, sizeof(g)))
			return i;
	return 0;
}

/* cm_lock held: a TCP socket bound to addr gives port semantics; no_port: the ephemeral port is
 * chosen by connect() (IP_BIND_ADDRESS_NO_PORT) */
static int bind_socket(struct cm_id *c, const struct sockaddr *addr, bool no_port)
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
	/*
	 * rdma_cm ports know no TCP TIME_WAIT: without SO_REUSEADDR a server could
	 * not listen again on its port right after its connections closed. Two
	 * listeners on one address and port still get EADDRINUSE.
	 */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	/*
	 * An explicit bind to port 0 makes the kernel check the new port against
	 * every socket bound on the address (O(n): with 10 000 connections open it
	 * was most of the set-up time); an active side's port only matters once
	 * it connects, and connect() picks one by its 4-tuple hash.
	 */
	if (no_port)
		setsockopt(fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
	if (addr->sa_family == AF_INET6) {
		int v6only = c->afonly;

		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &v6only, sizeof(v6only));
	}
	if (bind(fd, addr, sa_len(addr)) || getsockname(fd, (struct sockaddr *)&ss, &len)) {
		int e = errno;

		close(fd);
		errno = e == EADDRNOTAVAIL ? EADDRNOTAVAIL : e;
		return -1;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c->fd = fd;
	memcpy(&c->id.route.addr.src_storage, &ss, len);
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
	if (c->state != CMS_IDLE) {
		pthread_mutex_unlock(&cm_lock);
		errno = EINVAL;
		return -1;
	}
	ret = bind_socket(c, addr, false);
	if (!ret) {
		set_state(c, CMS_BOUND);
		/* a specific address belongs to the device; the wildcard to none yet */
		if (!sa_is_any(addr))
			c->id.verbs = cm_ctx;
		c->id.port_num = 1;
	}
	pthread_mutex_unlock(&cm_lock);
	return ret;
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
		ok = !bind_socket(c, (struct sockaddr *)&src, true);
	}
	set_state(c, CMS_ADDR_QUERY);
	if (ok) {
		c->id.verbs = cm_ctx;
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

		if (bind_socket(c, (struct sockaddr *)&any, false)) {
			pthread_mutex_unlock(&cm_lock);
			return -1;
		}
		set_state(c, CMS_BOUND);
	}
	if (c->state != CMS_BOUND || listen(c->fd, backlog > 0 ? backlog : 128)) {
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

SR_EXPORT uint16_t rdma_get_src_port(struct rdma_cm_id *id)
{
	if (!id)
		return 0;
	return id->route.addr.src_addr.sa_family == AF_INET6 ? id->route.addr.src_sin6.sin6_port :
							       id->route.addr.src_sin.sin_port;
}

SR_EXPORT uint16_t rdma_get_dst_port(struct rdma_cm_id *id)
{
	if (!id)
		return 0;
	return id->route.addr.dst_addr.sa_family == AF_INET6 ? id->route.addr.dst_sin6.sin6_port :
							       id->route.addr.dst_sin.sin_port;
}

SR_EXPORT struct ibv_context **rdma_get_devices(int *num_devices)
{
	struct ibv_context **list;

	if (cm_start())
		return NULL;
	list = calloc(2, sizeof(*list));
	if (!list) {
		errno = ENOMEM;
		return NULL;
	}
	list[0] = cm_ctx;
	if (num_devices)
		*num_devices = 1;
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
