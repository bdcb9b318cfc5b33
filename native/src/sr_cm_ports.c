/* SPDX-License-Identifier: Apache-2.0 */
/*
 * librdmacm for softrdma0: the RDMA port space.
 *
 * As on InfiniBand and RoCE, rdma_cm's ports are a namespace of their own:
 * an rdma_cm listener on port P and a TCP listener on port P coexist. The
 * space is the machine's, kept in the registry directory (sr_registry.c):
 *     <rundir>/rdma-cm/<ps>.<port>/<address>            a listener
 *     <rundir>/rdma-cm/<ps>.<port>/<address>@<pid>.<n>  an id bound, not listening
 * (ps "tcp" or "ib"; the address as inet_ntop writes it, a link-local IPv6
 * one followed by "%<scope id>"). A claim file says "<pid> <tcp port> <flags>"
 * (flags: L listening, R reuseaddr, A afonly, - none) and is held with flock()
 * while its id lives, so a dead process's claims hold nothing. Underneath, a
 * listener is a TCP listening socket on its address and an ephemeral TCP port,
 * the "tcp port" of its claim, which rdma_connect finds with one open and read
 * of the listener's file (and, for a destination it found before, one flock()
 * on that file, kept open).
 *
 * Binds and listens check and claim under flock() of the rdma-cm directory,
 * with the kernel's rules (cma_check_port): ids that both set REUSEADDR share;
 * an IPv4 id and an AFONLY IPv6 one never meet; otherwise a wildcard address
 * on the port conflicts with any other (EADDRNOTAVAIL) and the same address
 * conflicts (EADDRINUSE); a listener shares with nobody; port 0 picks a port
 * of ip_local_port_range that nobody holds.
 *
 * Files are written by other processes, which may have died at any point: a
 * claim that is not a regular file, that no live process holds, or whose name
 * or contents do not parse is skipped, never trusted; the next bind on its
 * port removes stale ones. A port's directory goes with its last claim.
 */
#define _GNU_SOURCE
#include "sr_cm_int.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SPACE_DIR "rdma-cm"
/* the space's lock is held for a scan of one port's directory: a holder that
 * takes this long is stuck, and the bind fails rather than hangs */
#define SPACE_LOCK_WAIT_MS 5000

struct claim {
	int family;
	uint8_t addr[16];
	uint32_t scope;
	bool any, afonly, reuse, listening;
	unsigned int tcp_port;
};

static const char *ps_name(enum rdma_port_space ps)
{
	return ps == RDMA_PS_IB ? "ib" : "tcp";
}

static void claim_of(const struct sockaddr *sa, bool afonly, bool reuse, struct claim *cl)
{
	memset(cl, 0, sizeof(*cl));
	cl->family = sa->sa_family;
	if (sa->sa_family == AF_INET) {
		memcpy(cl->addr, &((const struct sockaddr_in *)sa)->sin_addr, 4);
		/* as the kernel: an IPv4 id is AFONLY unless told otherwise */
		cl->afonly = true;
	} else {
		const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;

		memcpy(cl->addr, &s6->sin6_addr, 16);
		if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
			cl->scope = s6->sin6_scope_id;
		cl->afonly = afonly;
	}
	cl->any = sa_is_any(sa);
	cl->reuse = reuse;
}

/* "<address>" or "<address>%<scope>"; false if it does not fit */
static bool claim_name(const struct claim *cl, char *buf, size_t len)
{
	char a[INET6_ADDRSTRLEN];
	int n;

	if (!inet_ntop(cl->family, cl->addr, a, sizeof(a)))
		return false;
	n = cl->scope ? snprintf(buf, len, "%s%%%u", a, cl->scope) : snprintf(buf, len, "%s", a);
	return n > 0 && (size_t)n < len;
}

static bool all_digits(const char *s, const char *end)
{
	if (s == end)
		return false;
	for (; s < end; s++)
		if (*s < '0' || *s > '9')
			return false;
	return true;
}

/* the address of a claim's file name; false for names that are not claims */
static bool parse_name(const char *name, struct claim *cl)
{
	const char *at = strchr(name, '@'), *end = at ? at : name + strlen(name);
	char a[INET6_ADDRSTRLEN + 12], *pct;

	memset(cl, 0, sizeof(*cl));
	if ((size_t)(end - name) >= sizeof(a))
		return false;
	if (at) {
		const char *dot = strchr(at + 1, '.');

		if (!dot || !all_digits(at + 1, dot) || !all_digits(dot + 1, dot + strlen(dot)))
			return false;
	}
	memcpy(a, name, (size_t)(end - name));
	a[end - name] = 0;
	pct = strchr(a, '%');
	if (pct) {
		char *e;
		unsigned long scope;

		*pct = 0;
		errno = 0;
		scope = strtoul(pct + 1, &e, 10);
		if (!all_digits(pct + 1, pct + 1 + strlen(pct + 1)) || *e || errno || scope > UINT32_MAX)
			return false;
		cl->scope = (uint32_t)scope;
	}
	if (!pct && inet_pton(AF_INET, a, cl->addr) == 1) {
		cl->family = AF_INET;
		cl->any = !memcmp(cl->addr, "\0\0\0\0", 4);
		return true;
	}
	if (inet_pton(AF_INET6, a, cl->addr) == 1) {
		cl->family = AF_INET6;
		cl->any = IN6_IS_ADDR_UNSPECIFIED((struct in6_addr *)cl->addr);
		return true;
	}
	return false;
}

/* "<pid> <tcp port> <flags>": what a live claim says; false for anything else */
static bool parse_contents(int fd, struct claim *cl)
{
	char buf[64] = "", flags[8];
	ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
	int pid, used = 0;
	unsigned int port;

	if (n <= 0)
		return false;
	buf[n] = 0;
	if (sscanf(buf, "%d %u %7s%n", &pid, &port, flags, &used) != 3 || pid <= 0 || port > 65535 ||
	    (buf[used] && strcmp(buf + used, "\n")))
		return false;
	if (strcmp(flags, "-")) {
		for (const char *f = flags; *f; f++) {
			if (*f == 'L')
				cl->listening = true;
			else if (*f == 'R')
				cl->reuse = true;
			else if (*f == 'A')
				cl->afonly = true;
			else
				return false;
		}
	}
	if (cl->listening && (port == 0 || cl->reuse))
		return false;
	/* an IPv4 claim is always AFONLY (claim_of) */
	if (cl->family == AF_INET)
		cl->afonly = true;
	cl->tcp_port = port;
	return true;
}

static void write_flags(const struct claim *cl, char *f)
{
	if (cl->listening)
		*f++ = 'L';
	if (cl->reuse)
		*f++ = 'R';
	if (cl->afonly && cl->family == AF_INET6)
		*f++ = 'A';
	*f = 0;
}

/* a regular file, opened without following links or blocking (a FIFO), or -1 */
static int open_entry(int dirfd, const char *name)
{
	struct stat st;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		return -1;
	}
	return fd;
}

/* a live process holds the claim (its owner keeps it locked exclusively) */
static bool held(int fd)
{
	return flock(fd, LOCK_SH | LOCK_NB) && errno == EWOULDBLOCK;
}

/* cma_check_port: what a new owner `me` meets in the claim `cur` (0: they share) */
static int conflict(const struct claim *me, const struct claim *cur)
{
	if (!me)
		return EADDRNOTAVAIL;
	if (me->reuse && cur->reuse)
		return 0;
	if (me->afonly && cur->afonly && me->family != cur->family)
		return 0;
	if (me->any || cur->any)
		return EADDRNOTAVAIL;
	if (me->family == cur->family && !memcmp(me->addr, cur->addr, me->family == AF_INET ? 4 : 16) &&
	    me->scope == cur->scope)
		return EADDRINUSE;
	return 0;
}

static int space_dir(char *buf, size_t len)
{
	const char *run = softrdma_internal_rundir();
	int n = snprintf(buf, len, "%s/" SPACE_DIR, run ? run : "");

	if (!run || !*run || n <= 0 || (size_t)n >= len) {
		errno = ENAMETOOLONG;
		return -1;
	}
	return 0;
}

/* the space's directory, locked against other binders; -1 with errno */
static int space_lock(void)
{
	char path[PATH_MAX];
	int fd;

	if (space_dir(path, sizeof(path)))
		return -1;
	if (mkdir(path, 0700) && errno != EEXIST)
		return -1;
	fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0) {
		int e = errno;

		if (e == ENOTDIR || e == ELOOP) {
			fprintf(stderr, "softrdma: %s is not a directory (rdma_cm keeps its ports there): remove it\n",
				path);
			e = ENOTDIR;
		}
		errno = e;
		return -1;
	}
	for (int waited = 0; flock(fd, LOCK_EX | LOCK_NB); waited++) {
		int e = errno;

		if (e != EWOULDBLOCK || waited >= SPACE_LOCK_WAIT_MS) {
			close(fd);
			errno = e == EWOULDBLOCK ? EBUSY : e;
			return -1;
		}
		usleep(1000);
	}
	return fd;
}

/*
 * Space locked: what claiming `port` for `me` meets (0, EADDRINUSE,
 * EADDRNOTAVAIL); me == NULL: whether anybody holds the port. Stale claims
 * are removed on the way (nobody creates one without the lock); `self` names
 * the caller's own claim.
 */
static int check_port(int space, enum rdma_port_space ps, unsigned int port, const struct claim *me,
		      const char *self)
{
	char name[32];
	struct dirent *e;
	int dfd, err = 0;
	DIR *d;

	snprintf(name, sizeof(name), "%s.%u", ps_name(ps), port);
	dfd = openat(space, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (dfd < 0) {
		if (errno == ENOENT)
			return 0;
		cm_dbg("%s/%s is not a port directory: port %u unusable", SPACE_DIR, name, port);
		return EADDRINUSE;
	}
	d = fdopendir(dfd);
	if (!d) {
		err = errno;
		close(dfd);
		return err;
	}
	while (!err && (e = readdir(d))) {
		struct claim cur;
		int fd;

		if (e->d_name[0] == '.' || (self && !strcmp(e->d_name, self)) || !parse_name(e->d_name, &cur))
			continue;
		fd = open_entry(dirfd(d), e->d_name);
		if (fd < 0)
			continue;
		if (!held(fd)) {
			cm_dbg("stale rdma_cm claim %s/%s removed", name, e->d_name);
			unlinkat(dirfd(d), e->d_name, 0);
		} else if (parse_contents(fd, &cur)) {
			err = conflict(me, &cur);
		}
		close(fd);
	}
	closedir(d);
	return err;
}

static void local_port_range(unsigned int *low, unsigned int *high)
{
	unsigned int l = 0, h = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");

	if (f) {
		if (fscanf(f, "%u %u", &l, &h) != 2)
			l = h = 0;
		fclose(f);
	}
	if (!l || h > 65535 || l > h) {
		l = 32768;
		h = 60999;
	}
	*low = l;
	*high = h;
}

/* space locked: a port nobody holds, from a random start as the kernel's
 * cma_alloc_any_port, not the one given last */
static int pick_port(int space, enum rdma_port_space ps, unsigned int *port)
{
	static unsigned int last;
	unsigned int low, high, span, start;

	local_port_range(&low, &high);
	span = high - low + 1;
	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start))
		start = (unsigned int)sr_clock_ns();
	for (unsigned int i = 0; i < span; i++) {
		unsigned int p = low + (start + i) % span;
		int err;

		if (p == last)
			continue;
		err = check_port(space, ps, p, NULL, NULL);
		if (!err) {
			*port = last = p;
			return 0;
		}
		if (err != EADDRNOTAVAIL && err != EADDRINUSE)
			return err;
	}
	return EADDRNOTAVAIL;
}

/* ports below 1024 need CAP_NET_BIND_SERVICE, as the kernel's cma_use_port asks */
static bool may_bind_service(void)
{
	struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct d[_LINUX_CAPABILITY_U32S_3];

	memset(d, 0, sizeof(d));
	if (syscall(SYS_capget, &h, d))
		return false;
	return d[CAP_TO_INDEX(CAP_NET_BIND_SERVICE)].effective & CAP_TO_MASK(CAP_NET_BIND_SERVICE);
}

static int write_claim(int fd, const struct claim *cl)
{
	char buf[64], flags[8];
	int len;

	write_flags(cl, flags);
	len = snprintf(buf, sizeof(buf), "%d %u %s\n", (int)getpid(), cl->tcp_port, *flags ? flags : "-");
	if (ftruncate(fd, 0) || pwrite(fd, buf, (size_t)len, 0) != len)
		return errno ? errno : EIO;
	return 0;
}

/* space locked: the claim file of `me` on `port`, held; 0 or an errno */
static int create_claim(int space, struct cm_id *c, unsigned int port, const struct claim *me)
{
	static unsigned long serial;
	char dir[32], addr[INET6_ADDRSTRLEN + 12], base[PATH_MAX], path[PATH_MAX];
	int fd, err, n;

	snprintf(dir, sizeof(dir), "%s.%u", ps_name(c->id.ps), port);
	if (mkdirat(space, dir, 0700) && errno != EEXIST)
		return errno;
	if (!claim_name(me, addr, sizeof(addr)) || space_dir(base, sizeof(base)))
		return EINVAL;
	n = snprintf(path, sizeof(path), "%s/%s/%s@%d.%lu", base, dir, addr, (int)getpid(), ++serial);
	if (n <= 0 || (size_t)n >= sizeof(path))
		return ENAMETOOLONG;
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0 && errno == EEXIST) {
		/* left by a dead process that had our pid: nobody holds it */
		unlink(path);
		fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
	}
	if (fd < 0)
		return errno;
	if (flock(fd, LOCK_EX | LOCK_NB) || (err = write_claim(fd, me))) {
		err = errno ? errno : EIO;
		unlink(path);
		close(fd);
		return err;
	}
	c->claim_path = strdup(path);
	if (!c->claim_path) {
		unlink(path);
		close(fd);
		return ENOMEM;
	}
	c->claim_fd = fd;
	c->claim_port = (uint16_t)port;
	return 0;
}

int port_bind(struct cm_id *c, uint16_t port)
{
	struct sockaddr *src = &c->id.route.addr.src_addr;
	unsigned int p = port;
	struct claim me;
	int space, err;

	claim_of(src, c->afonly, c->reuseaddr, &me);
	if (p && p < 1024 && !may_bind_service()) {
		errno = EACCES;
		return -1;
	}
	space = space_lock();
	if (space < 0)
		return -1;
	err = p ? check_port(space, c->id.ps, p, &me, NULL) : pick_port(space, c->id.ps, &p);
	if (!err)
		err = create_claim(space, c, p, &me);
	close(space);
	if (err) {
		errno = err;
		return -1;
	}
	sa_set_port(src, (uint16_t)p);
	return 0;
}

int port_listen(struct cm_id *c, int backlog)
{
	const struct sockaddr *src = &c->id.route.addr.src_addr;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	char addr[INET6_ADDRSTRLEN + 12], path[PATH_MAX], *slash, *canon;
	struct claim me;
	int space, err = 0;

	/* a listener shares its port with nobody: REUSEADDR ends here (kernel's rdma_listen) */
	claim_of(src, c->afonly, false, &me);
	if (!c->claim_path || !claim_name(&me, addr, sizeof(addr))) {
		errno = EINVAL;
		return -1;
	}
	slash = strrchr(c->claim_path, '/');
	if (snprintf(path, sizeof(path), "%.*s/%s", (int)(slash - c->claim_path), c->claim_path, addr) >=
	    (int)sizeof(path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	canon = strdup(path);
	if (!canon) {
		errno = ENOMEM;
		return -1;
	}
	space = space_lock();
	if (space < 0) {
		free(canon);
		return -1;
	}
	err = check_port(space, c->id.ps, c->claim_port, &me, slash + 1);
	if (!err && (listen(c->fd, backlog) || getsockname(c->fd, (struct sockaddr *)&ss, &len)))
		err = errno;
	if (!err) {
		me.listening = true;
		me.tcp_port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
							      ((struct sockaddr_in *)&ss)->sin_port);
		err = write_claim(c->claim_fd, &me);
	}
	/* the listener's name, found by rdma_connect; what sits there is stale or
	 * garbage (a live listener was a conflict), and rename replaces it */
	if (!err && rename(c->claim_path, canon))
		err = errno == EISDIR || errno == ENOTEMPTY || errno == EEXIST ? EADDRINUSE : errno;
	close(space);
	if (err) {
		free(canon);
		errno = err;
		return -1;
	}
	free(c->claim_path);
	c->claim_path = canon;
	return 0;
}

void port_release(struct cm_id *c)
{
	int space;

	if (!c->claim_path)
		return;
	/* under the lock, so that no binder is about to create a claim in the
	 * port's directory when it goes (the last claim takes it along) */
	space = space_lock();
	/* the name first: nobody finds a claim that is about to be unlocked */
	unlink(c->claim_path);
	if (space >= 0) {
		*strrchr(c->claim_path, '/') = 0;
		rmdir(c->claim_path);
		close(space);
	}
	close(c->claim_fd);
	free(c->claim_path);
	c->claim_path = NULL;
	c->claim_port = 0;
}

/* the listener's claim for `name` in the port's directory, open (fd in *fd_out): its TCP port, or 0 */
static unsigned int listener_at(const char *portdir, const char *name, bool want_dual_stack, int *fd_out)
{
	char path[PATH_MAX];
	struct claim cl;
	unsigned int port = 0;
	int fd, n = snprintf(path, sizeof(path), "%s/%s", portdir, name);

	if (n <= 0 || (size_t)n >= sizeof(path))
		return 0;
	fd = open_entry(AT_FDCWD, path);
	if (fd < 0)
		return 0;
	memset(&cl, 0, sizeof(cl));
	cl.family = want_dual_stack ? AF_INET6 : AF_UNSPEC;
	if (held(fd) && parse_contents(fd, &cl) && cl.listening && !(want_dual_stack && cl.afonly))
		port = cl.tcp_port;
	if (port)
		*fd_out = fd;
	else
		close(fd);
	return port;
}

/*
 * Listeners found lately, with their claims kept open: while its owner holds
 * a claim, the listener lives and its TCP port stays (a claim is written once,
 * before it is published), and no other listener can take its destination
 * (it would conflict). So a connect to a destination found before costs one
 * flock() instead of a lookup; a claim that nobody holds any more is dropped.
 */
#define FOUND_MAX 16

static struct found {
	enum rdma_port_space ps;
	struct claim dst;
	uint16_t port;
	uint16_t tcp_port;
	int fd;
	bool used;
} found[FOUND_MAX];
static unsigned int found_next;

static bool same_dst(const struct found *f, enum rdma_port_space ps, const struct claim *dst, uint16_t port)
{
	return f->used && f->ps == ps && f->port == port && f->dst.family == dst->family &&
	       f->dst.scope == dst->scope && !memcmp(f->dst.addr, dst->addr, sizeof(dst->addr));
}

int port_lookup(enum rdma_port_space ps, const struct sockaddr *dst, uint16_t *tcp_port)
{
	char base[PATH_MAX], portdir[PATH_MAX], name[INET6_ADDRSTRLEN + 12];
	uint16_t dport = sa_port(dst);
	struct claim cl;
	unsigned int port = 0;
	struct found *f;
	int n, fd = -1;

	claim_of(dst, false, false, &cl);
	for (int i = 0; i < FOUND_MAX; i++) {
		f = &found[i];
		if (!same_dst(f, ps, &cl, dport))
			continue;
		if (held(f->fd)) {
			*tcp_port = f->tcp_port;
			return 0;
		}
		close(f->fd);
		f->used = false;
	}
	if (space_dir(base, sizeof(base)))
		return -1;
	n = snprintf(portdir, sizeof(portdir), "%s/%s.%u", base, ps_name(ps), dport);
	if (n <= 0 || (size_t)n >= sizeof(portdir)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	/* a listener on the address itself, else one on the wildcard of its family,
	 * else (IPv4) a dual-stack IPv6 wildcard listener */
	if (claim_name(&cl, name, sizeof(name)))
		port = listener_at(portdir, name, false, &fd);
	if (!port)
		port = listener_at(portdir, dst->sa_family == AF_INET ? "0.0.0.0" : "::", false, &fd);
	if (!port && dst->sa_family == AF_INET)
		port = listener_at(portdir, "::", true, &fd);
	if (!port) {
		errno = ENOENT;
		return -1;
	}
	f = &found[found_next++ % FOUND_MAX];
	if (f->used)
		close(f->fd);
	*f = (struct found){ .ps = ps, .dst = cl, .port = dport, .tcp_port = (uint16_t)port, .fd = fd, .used = true };
	*tcp_port = (uint16_t)port;
	return 0;
}
