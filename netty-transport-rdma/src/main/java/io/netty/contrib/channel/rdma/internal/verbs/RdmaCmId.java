package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct rdma_cm_id} (with {@code struct rdma_route}, {@code struct rdma_addr}, {@code struct rdma_ib_addr}). */
final class RdmaCmId {
    static final GroupLayout LAYOUT = struct("rdma_cm_id",
            POINTER.withName("verbs"),
            POINTER.withName("channel"),
            POINTER.withName("context"),
            POINTER.withName("qp"),
            struct("rdma_route",
                    struct("rdma_addr",
                            SockaddrStorage.LAYOUT.withName("src_storage"),
                            SockaddrStorage.LAYOUT.withName("dst_storage"),
                            union("rdma_addr_addr",
                                    struct("rdma_ib_addr",
                                            IbvGid.LAYOUT.withName("sgid"),
                                            IbvGid.LAYOUT.withName("dgid"),
                                            BE16.withName("pkey")).withName("ibaddr")).withName("addr")).withName("addr"),
                    POINTER.withName("path_rec"),
                    U32.withName("num_paths")).withName("route"),
            U32.withName("ps"),
            U8.withName("port_num"),
            POINTER.withName("event"),
            POINTER.withName("send_cq_channel"),
            POINTER.withName("send_cq"),
            POINTER.withName("recv_cq_channel"),
            POINTER.withName("recv_cq"),
            POINTER.withName("srq"),
            POINTER.withName("pd"),
            U32.withName("qp_type"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle VERBS = field(LAYOUT, "verbs");
    static final VarHandle CHANNEL = field(LAYOUT, "channel");
    static final VarHandle CONTEXT = field(LAYOUT, "context");
    static final VarHandle QP = field(LAYOUT, "qp");
    static final long ROUTE_ADDR_SRC_STORAGE_OFFSET = offset(LAYOUT, "route.addr.src_storage");
    static final long ROUTE_ADDR_DST_STORAGE_OFFSET = offset(LAYOUT, "route.addr.dst_storage");
    static final VarHandle PS = field(LAYOUT, "ps");
    static final VarHandle PORT_NUM = field(LAYOUT, "port_num");
    static final VarHandle PD = field(LAYOUT, "pd");
    static final VarHandle QP_TYPE = field(LAYOUT, "qp_type");

    private RdmaCmId() {
    }
}
