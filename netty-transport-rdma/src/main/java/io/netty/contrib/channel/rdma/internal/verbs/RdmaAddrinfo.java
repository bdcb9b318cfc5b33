package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct rdma_addrinfo}: a node of the list {@code rdma_getaddrinfo} returns. */
final class RdmaAddrinfo {
    static final GroupLayout LAYOUT = struct("rdma_addrinfo",
            U32.withName("ai_flags"),
            U32.withName("ai_family"),
            U32.withName("ai_qp_type"),
            U32.withName("ai_port_space"),
            U32.withName("ai_src_len"),
            U32.withName("ai_dst_len"),
            POINTER.withName("ai_src_addr"),
            POINTER.withName("ai_dst_addr"),
            POINTER.withName("ai_src_canonname"),
            POINTER.withName("ai_dst_canonname"),
            U64.withName("ai_route_len"),
            POINTER.withName("ai_route"),
            U64.withName("ai_connect_len"),
            POINTER.withName("ai_connect"),
            POINTER.withName("ai_next"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle AI_FLAGS = field(LAYOUT, "ai_flags");
    static final VarHandle AI_FAMILY = field(LAYOUT, "ai_family");
    static final VarHandle AI_QP_TYPE = field(LAYOUT, "ai_qp_type");
    static final VarHandle AI_PORT_SPACE = field(LAYOUT, "ai_port_space");
    static final VarHandle AI_SRC_LEN = field(LAYOUT, "ai_src_len");
    static final VarHandle AI_DST_LEN = field(LAYOUT, "ai_dst_len");
    static final VarHandle AI_SRC_ADDR = field(LAYOUT, "ai_src_addr");
    static final VarHandle AI_DST_ADDR = field(LAYOUT, "ai_dst_addr");
    static final VarHandle AI_NEXT = field(LAYOUT, "ai_next");

    private RdmaAddrinfo() {
    }
}
