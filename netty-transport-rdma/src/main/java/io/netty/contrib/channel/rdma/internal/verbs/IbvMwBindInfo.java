package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_mw_bind_info}: what a memory window is bound to (inside {@code ibv_send_wr.bind_mw}). */
final class IbvMwBindInfo {
    static final GroupLayout LAYOUT = struct("ibv_mw_bind_info",
            POINTER_BITS.withName("mr"),
            U64.withName("addr"),
            U64.withName("length"),
            U32.withName("mw_access_flags"));

    private IbvMwBindInfo() {
    }
}
