/* 14. RLIMIT_MEMLOCK: a registration past the limit fails with ENOMEM, as the kernel's ib_umem_get refuses it */
#include "common.h"

#include <linux/capability.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

/* the kernel ignores the limit for CAP_IPC_LOCK (root): drop it from the effective set of this test's child */
static void drop_ipc_lock(void) {
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3};
    struct __user_cap_data_struct data[2];
    memset(data, 0, sizeof data);
    CHECK_OK(syscall(SYS_capget, &hdr, data));
    data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
    CHECK_OK(syscall(SYS_capset, &hdr, data));
}

TEST(memlock_limit, 30) {
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    struct rlimit rl;
    CHECK_OK(getrlimit(RLIMIT_MEMLOCK, &rl));
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 64 * page) SKIP("hard RLIMIT_MEMLOCK below 64 pages");
    drop_ipc_lock();
    rl.rlim_cur = 64 * page;
    CHECK_OK(setrlimit(RLIMIT_MEMLOCK, &rl));

    struct dev d;
    dev_open(&d);
    struct ibv_pd *pd = CHECK_PTR(ibv_alloc_pd(d.ctx));
    char *buf = xalloc(128 * page);
    struct ibv_mr *a = reg(pd, buf, 48 * page, IBV_ACCESS_LOCAL_WRITE);
    errno = 0;
    struct ibv_mr *over = ibv_reg_mr(pd, buf + 48 * page, 32 * page, IBV_ACCESS_LOCAL_WRITE);
    CHECK(over == NULL, "48 + 32 pages registered under a limit of 64");
    CHECK_EQ(errno, ENOMEM);
    /* every page a region spans counts: 15 pages and two bytes span 17 pages -> 65 */
    errno = 0;
    over = ibv_reg_mr(pd, buf + 48 * page - 1, 15 * page + 2, IBV_ACCESS_LOCAL_WRITE);
    CHECK(over == NULL, "a region spanning 17 pages fit in the 16 left");
    CHECK_EQ(errno, ENOMEM);
    /* up to the limit, not past it: 48 + 16 = 64 */
    struct ibv_mr *fill = reg(pd, buf + 48 * page, 16 * page, IBV_ACCESS_LOCAL_WRITE);
    dereg(a);
    /* deregistration gives the pages back */
    struct ibv_mr *b = reg(pd, buf + 64 * page, 48 * page, IBV_ACCESS_LOCAL_WRITE);
    dereg(b);
    dereg(fill);
    CHECK_OK(ibv_dealloc_pd(pd));
    dev_close(&d);
}
