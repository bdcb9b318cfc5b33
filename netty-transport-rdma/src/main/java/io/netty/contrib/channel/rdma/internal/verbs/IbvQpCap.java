package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_qp_cap}: queue pair capacities. */
final class IbvQpCap {
    static final GroupLayout LAYOUT = struct("ibv_qp_cap",
            U32.withName("max_send_wr"),
            U32.withName("max_recv_wr"),
            U32.withName("max_send_sge"),
            U32.withName("max_recv_sge"),
            U32.withName("max_inline_data"));

    private IbvQpCap() {
    }
}
