package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_qp}: a queue pair; {@code context} at offset 0 leads to the data-path ops. */
final class IbvQp {
    static final GroupLayout LAYOUT = struct("ibv_qp",
            POINTER.withName("context"),
            POINTER.withName("qp_context"),
            POINTER.withName("pd"),
            POINTER.withName("send_cq"),
            POINTER.withName("recv_cq"),
            POINTER.withName("srq"),
            U32.withName("handle"),
            U32.withName("qp_num"),
            U32.withName("state"),
            U32.withName("qp_type"),
            opaque("mutex", 40, 8),
            opaque("cond", 48, 8),
            U32.withName("events_completed"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle CONTEXT = field(LAYOUT, "context");
    static final VarHandle QP_NUM = field(LAYOUT, "qp_num");
    static final VarHandle STATE = field(LAYOUT, "state");
    static final VarHandle QP_TYPE = field(LAYOUT, "qp_type");

    private IbvQp() {
    }
}
