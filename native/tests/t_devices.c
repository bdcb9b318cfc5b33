/* 28. two devices, each with its own addresses (the software device with SOFTRDMA_DEVICE1_ADDRS=127.0.0.2; on
 * other hosts: two RDMA devices with an IPv4 address each, named by SOFTRDMA_TEST_ADDR2) */
#include "common.h"

#include <arpa/inet.h>
#include <dlfcn.h>

#define TMO 5000
#define LW IBV_ACCESS_LOCAL_WRITE

/* the second device's address; skips where there is no second device */
static const char *second_addr(void) {
    const char *a = getenv("SOFTRDMA_TEST_ADDR2");
    if (!a && dlsym(RTLD_DEFAULT, "softrdma_object_count")) a = getenv("SOFTRDMA_DEVICE1_ADDRS");
    int n = 0;
    struct ibv_device **l = ibv_get_device_list(&n);
    if (l) ibv_free_device_list(l);
    if (!a || n < 2)
        SKIP("one device (%d): run with SOFTRDMA_DEVICE1_ADDRS=127.0.0.2 (software device) or SOFTRDMA_TEST_ADDR2",
             n);
    return a;
}

static struct rdma_cm_id *listen_on(struct rdma_event_channel *ec, const char *addr) {
    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    CHECK(inet_pton(AF_INET, addr, &sa.sin_addr) == 1, "address %s", addr);
    CHECK_OK(rdma_bind_addr(id, (struct sockaddr *)&sa));
    CHECK_OK(rdma_listen(id, 8));
    return id;
}

static int gid_is(struct ibv_context *ctx, int index, const char *ipv4) {
    union ibv_gid g;
    struct in_addr a;
    if (ibv_query_gid(ctx, 1, index, &g)) return 0;
    inet_pton(AF_INET, ipv4, &a);
    static const uint8_t v4[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    return !memcmp(g.raw, v4, 12) && !memcmp(&g.raw[12], &a, 4);
}

TEST(devices_two_listed_with_their_own_gids, 20) {
    const char *addr2 = second_addr();
    int n = 0;
    struct ibv_device **l = CHECK_PTR(ibv_get_device_list(&n));
    CHECK_EQ(n, 2);
    CHECK(strcmp(ibv_get_device_name(l[0]), ibv_get_device_name(l[1])), "two names");
    CHECK(ibv_get_device_guid(l[0]) != ibv_get_device_guid(l[1]), "two GUIDs");
    struct ibv_context *c0 = CHECK_PTR(ibv_open_device(l[0])), *c1 = CHECK_PTR(ibv_open_device(l[1]));
    CHECK(c0->async_fd != c1->async_fd, "an async fd each");
    union ibv_gid g0, g1;
    int i0 = find_gid_index(c0, 1, addr2, &g0), i1 = find_gid_index(c1, 1, addr2, &g1);
    CHECK(i1 >= 0 && i0 < 0, "%s is %s's only (index there %d, on %s %d)", addr2, ibv_get_device_name(l[1]), i1,
          ibv_get_device_name(l[0]), i0);
    CHECK(find_gid_index(c1, 1, test_addr(), &g1) < 0, "%s is not %s's", test_addr(), ibv_get_device_name(l[1]));
    CHECK(gid_is(c1, 0, addr2), "softrdma1's GID 0 is its first address");
    struct ibv_port_attr pa;
    CHECK_OK(ibv_query_port(c1, 1, &pa));
    CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
    int cm_n = 0;
    struct ibv_context **cm = CHECK_PTR(rdma_get_devices(&cm_n));
    sr_used_cm = 1;
    CHECK_EQ(cm_n, 2);
    CHECK(cm[0]->device != cm[1]->device, "rdma_get_devices: a context of each device");
    rdma_free_devices(cm);
    CHECK_OK(ibv_close_device(c0));
    CHECK_OK(ibv_close_device(c1));
    ibv_free_device_list(l);
}

/* rdma_cm puts an id on the device that owns its address: a listener and what it accepts, a bound client */
TEST(devices_cm_ids_on_the_owner_of_their_address, 30) {
    const char *addr2 = second_addr();
    struct rdma_event_channel *lec = cm_channel(), *cec = cm_channel();
    struct rdma_cm_id *l0 = listen_on(lec, test_addr()), *l1 = listen_on(lec, addr2);
    CHECK(l0->verbs && l1->verbs && l0->verbs->device != l1->verbs->device, "listeners on two devices");
    LOG("%s on %s, %s on %s", test_addr(), ibv_get_device_name(l0->verbs->device), addr2,
        ibv_get_device_name(l1->verbs->device));
    struct rdma_cm_id *listeners[2] = {l0, l1};
    const char *addrs[2] = {test_addr(), addr2};
    struct qp_opts o;
    qp_opts_default(&o);
    for (int i = 0; i < 2; i++) {
        uint16_t port = ntohs(rdma_get_src_port(listeners[i]));
        struct rdma_cm_id *cid;
        CHECK_OK(rdma_create_id(cec, &cid, NULL, RDMA_PS_TCP));
        /* bound to the same device's address: both ends on it */
        struct sockaddr_in src, dst = test_sockaddr(port);
        memset(&src, 0, sizeof src);
        src.sin_family = AF_INET;
        inet_pton(AF_INET, addrs[i], &src.sin_addr);
        inet_pton(AF_INET, addrs[i], &dst.sin_addr);
        CHECK_OK(rdma_resolve_addr(cid, (struct sockaddr *)&src, (struct sockaddr *)&dst, 2000));
        CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_ADDR_RESOLVED, TMO)));
        CHECK(cid->verbs->device == listeners[i]->verbs->device, "client bound to %s on its device", addrs[i]);
        CHECK_OK(rdma_resolve_route(cid, 2000));
        CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_ROUTE_RESOLVED, TMO)));
        struct ep a, b;
        cm_ep_setup(&a, cid, cec, &o);
        struct rdma_conn_param cp;
        memset(&cp, 0, sizeof cp);
        cp.retry_count = 7;
        cp.rnr_retry_count = 7;
        CHECK_OK(rdma_connect(cid, &cp));
        struct rdma_cm_event *ev = cm_expect(lec, RDMA_CM_EVENT_CONNECT_REQUEST, TMO);
        CHECK(ev->listen_id == listeners[i], "request on the listener of %s", addrs[i]);
        struct rdma_cm_id *sid = ev->id;
        CHECK_OK(rdma_ack_cm_event(ev));
        CHECK(sid->verbs->device == listeners[i]->verbs->device, "accepted id on the device of %s", addrs[i]);
        cm_ep_setup(&b, sid, lec, &o);
        CHECK_OK(rdma_accept(sid, &cp));
        CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
        CHECK_OK(rdma_ack_cm_event(cm_expect(lec, RDMA_CM_EVENT_ESTABLISHED, TMO)));
        char *buf = xalloc(4096), *rbuf = xalloc(4096);
        struct ibv_mr *mr = reg(a.pd, buf, 4096, LW), *rmr = reg(b.pd, rbuf, 4096, LW);
        fill_pattern(buf, 512, 40 + i);
        post_recv(b.qp, 1, rbuf, 4096, rmr->lkey);
        post_send(a.qp, 1, IBV_WR_SEND, buf, 512, mr->lkey, IBV_SEND_SIGNALED, 0, 0, 0);
        struct ibv_wc wc = wait_wc(b.rcq, TMO);
        check_wc_ok(&wc, 1, IBV_WC_RECV, b.qp->qp_num, 512, 0, 0);
        CHECK(check_pattern(rbuf, 512, 40 + i), "payload over %s", addrs[i]);
        wc = wait_wc(a.scq, TMO);
        check_wc_ok(&wc, 1, IBV_WC_SEND, a.qp->qp_num, WC_ANY_LEN, 0, 0);
        CHECK_OK(rdma_disconnect(cid));
        CHECK_OK(rdma_ack_cm_event(cm_expect(lec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
        CHECK_OK(rdma_ack_cm_event(cm_expect(cec, RDMA_CM_EVENT_DISCONNECTED, TMO)));
        ep_destroy(&a);
        ep_destroy(&b);
        CHECK_OK(rdma_destroy_id(sid));
        CHECK_OK(rdma_destroy_id(cid));
    }
    CHECK_OK(rdma_destroy_id(l0));
    CHECK_OK(rdma_destroy_id(l1));
    rdma_destroy_event_channel(lec);
    rdma_destroy_event_channel(cec);
    sr_leak_check();
}

/* softrdma1's port going down is softrdma1's: softrdma0's contexts hear nothing, its resolves still work */
TEST(devices_port_down_is_one_devices, 20) {
    const char *addr2 = second_addr();
    int (*hook)(const char *, unsigned int, int) =
        (int (*)(const char *, unsigned int, int))dlsym(RTLD_DEFAULT, "softrdma_set_port_state");
    if (!hook) SKIP("not the software device");
    int n = 0;
    struct ibv_device **l = CHECK_PTR(ibv_get_device_list(&n));
    struct ibv_context *c0 = CHECK_PTR(ibv_open_device(l[0])), *c1 = CHECK_PTR(ibv_open_device(l[1]));
    CHECK_OK(hook(ibv_get_device_name(l[1]), 1, 0));
    CHECK(fd_readable(c1->async_fd, TMO), "PORT_ERR on %s", ibv_get_device_name(l[1]));
    struct ibv_async_event ev;
    CHECK_OK(ibv_get_async_event(c1, &ev));
    CHECK_EQ(ev.event_type, IBV_EVENT_PORT_ERR);
    ibv_ack_async_event(&ev);
    CHECK(!fd_readable(c0->async_fd, 50), "%s heard another device's port event", ibv_get_device_name(l[0]));
    struct ibv_port_attr pa;
    CHECK_OK(ibv_query_port(c0, 1, &pa));
    CHECK_EQ(pa.state, IBV_PORT_ACTIVE);
    CHECK_OK(ibv_query_port(c1, 1, &pa));
    CHECK_EQ(pa.state, IBV_PORT_DOWN);

    struct rdma_event_channel *ec = cm_channel();
    struct rdma_cm_id *id;
    CHECK_OK(rdma_create_id(ec, &id, NULL, RDMA_PS_TCP));
    struct sockaddr_in sa = test_sockaddr(1);
    inet_pton(AF_INET, addr2, &sa.sin_addr);
    struct sockaddr_in src = sa;
    src.sin_port = 0;
    CHECK_OK(rdma_resolve_addr(id, (struct sockaddr *)&src, (struct sockaddr *)&sa, 2000));
    struct rdma_cm_event *e = cm_expect(ec, RDMA_CM_EVENT_ADDR_ERROR, TMO);
    CHECK_EQ(e->status, -ENETUNREACH);
    CHECK_OK(rdma_ack_cm_event(e));
    CHECK_OK(rdma_destroy_id(id));
    /* softrdma0 still resolves */
    id = cm_resolve(ec, test_addr(), 1);
    CHECK_OK(rdma_destroy_id(id));

    CHECK_OK(hook(ibv_get_device_name(l[1]), 1, 1));
    CHECK(fd_readable(c1->async_fd, TMO), "PORT_ACTIVE on %s", ibv_get_device_name(l[1]));
    CHECK_OK(ibv_get_async_event(c1, &ev));
    CHECK_EQ(ev.event_type, IBV_EVENT_PORT_ACTIVE);
    ibv_ack_async_event(&ev);
    rdma_destroy_event_channel(ec);
    CHECK_OK(ibv_close_device(c0));
    CHECK_OK(ibv_close_device(c1));
    ibv_free_device_list(l);
}
