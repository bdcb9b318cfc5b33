package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_context_ops}: the data-path function pointers (the rest are compatibility slots). */
final class IbvContextOps {
    static final GroupLayout LAYOUT = struct("ibv_context_ops",
            reserved(7 * 8, 8),
            POINTER.withName("alloc_mw"),
            POINTER.withName("bind_mw"),
            POINTER.withName("dealloc_mw"),
            reserved(8, 8),
            POINTER.withName("poll_cq"),
            POINTER.withName("req_notify_cq"),
            reserved(7 * 8, 8),
            POINTER.withName("post_srq_recv"),
            reserved(4 * 8, 8),
            POINTER.withName("post_send"),
            POINTER.withName("post_recv"),
            reserved(5 * 8, 8));

    private IbvContextOps() {
    }
}
