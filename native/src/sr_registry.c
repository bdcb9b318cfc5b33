/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The instance registry. Every process that opens the device is one instance:
 * it claims a small instance id in the registry directory shared by all
 * processes of the machine ($SOFTRDMA_RUNDIR, default /tmp/softrdma-<uid>):
 * file "<id>" is held with flock() for the life of the process and says
 * "<pid> <tcp port>"; a dead process's lock vanishes and its id is reused.
 * QPN = instance << 16 | index, so a peer that knows only GID + QPN (all that
 * ibv_rc_pingpong exchanges) reads entry QPN >> 16 for the port (sr_net.c).
 * rdma_cm's port space lives in the subdirectory "rdma-cm" (sr_cm_ports.c).
 */
#define _GNU_SOURCE
#include "sr_net_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>

uint32_t my_inst;
static int reg_fd = -1;
dev_t rundir_dev;
ino_t rundir_ino;
uint16_t my_port;
char rundir[256];

uint32_t sr_net_instance(void)
{
	return my_inst;
}

/* for librdmacm.so.1: rdma_cm keeps its port space in the same directory (sr_cm_ports.c) */
SR_EXPORT const char *softrdma_internal_rundir(void)
{
	return rundir;
}

/* ---- registry ------------------------------------------------------------------ */
/*
 * Entries are written by other processes, which may have been killed at any
 * point, and anything else may sit in the directory: an entry that is not a
 * regular file (directory, FIFO, device, symlink), cannot be opened, or holds
 * anything but "<pid> <port>" is skipped, never trusted.
 */
static int registry_open(const char *path, int flags)
{
	struct stat st;
	int fd = open(path, flags | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK, 0600);

	if (fd < 0)
		return -1;
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		close(fd);
		errno = EINVAL;
		return -1;
	}
	return fd;
}

/* an error that concerns one entry, not the directory or the process */
static bool entry_error(int err)
{
	return err == EINVAL || err == EISDIR || err == ELOOP || err == EACCES || err == EPERM ||
	       err == ENXIO || err == ETXTBSY || err == EWOULDBLOCK;
}

int claim_instance(void)
{
	const char *dir = getenv("SOFTRDMA_RUNDIR");
	char path[300], buf[64];
	int last_err = EMFILE; /* every id is taken */

	if (dir && *dir) {
		if (strlen(dir) >= sizeof(rundir)) {
			snprintf(rundir, sizeof(rundir), "%.200s...", dir);
			errno = ENAMETOOLONG;
			return -1;
		}
		snprintf(rundir, sizeof(rundir), "%s", dir);
	} else {
		snprintf(rundir, sizeof(rundir), "/tmp/softrdma-%u", (unsigned)getuid());
	}
	if (mkdir(rundir, 0700) && errno != EEXIST)
		return -1;
	{
		struct stat st;

		/* names the same-host wire's sockets: instances of another registry never meet there */
		if (stat(rundir, &st))
			return -1;
		rundir_dev = st.st_dev;
		rundir_ino = st.st_ino;
	}
	for (uint32_t id = 1; id <= SR_MAX_INSTANCES; id++) {
		int fd, len;

		snprintf(path, sizeof(path), "%s/%u", rundir, id);
		fd = registry_open(path, O_RDWR | O_CREAT);
		if (fd < 0) {
			if (!entry_error(errno))
				return -1;
			/* not ours to use (another user's, not a file): the next id */
			last_err = errno;
			continue;
		}
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			int err = errno;

			close(fd);
			if (err != EWOULDBLOCK) {
				errno = err;
				return -1;
			}
			continue; /* a live instance holds it */
		}
		len = snprintf(buf, sizeof(buf), "%d %u\n", (int)getpid(), (unsigned)my_port);
		if (ftruncate(fd, 0) || pwrite(fd, buf, (size_t)len, 0) != len) {
			close(fd);
			return -1;
		}
		reg_fd = fd;
		my_inst = id;
		return 0;
	}
	errno = last_err;
	return -1;
}

/* the TCP port (and pid) of a live instance; -1 if the entry is missing, malformed or stale */
int registry_port(uint32_t inst, int *pid_out)
{
	char path[300], buf[64] = "";
	int fd, pid = 0;
	unsigned port = 0;
	ssize_t n;

	snprintf(path, sizeof(path), "%s/%u", rundir, inst);
	fd = registry_open(path, O_RDONLY);
	if (fd < 0)
		return -1;
	/* a live instance holds its entry locked: an unlocked one is left by a dead process */
	if (!flock(fd, LOCK_SH | LOCK_NB)) {
		close(fd);
		sr_dbg("registry entry %s is stale (no live instance holds it)", path);
		return -1;
	}
	n = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (n <= 0 || sscanf(buf, "%d %u", &pid, &port) != 2 || pid <= 0 || port == 0 ||
	    port > 65535)
		return -1;
	*pid_out = pid;
	return (int)port;
}
