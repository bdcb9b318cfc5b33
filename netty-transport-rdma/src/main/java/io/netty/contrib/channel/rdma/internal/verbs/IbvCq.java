package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_cq}: a completion queue; {@code context} at offset 0 leads to the data-path ops. */
final class IbvCq {
    static final GroupLayout LAYOUT = struct("ibv_cq",
            POINTER.withName("context"),
            POINTER.withName("channel"),
            POINTER.withName("cq_context"),
            U32.withName("handle"),
            U32.withName("cqe"),
            opaque("mutex", 40, 8),
            opaque("cond", 48, 8),
            U32.withName("comp_events_completed"),
            U32.withName("async_events_completed"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle CONTEXT = field(LAYOUT, "context");
    static final VarHandle CHANNEL = field(LAYOUT, "channel");
    static final VarHandle CQE = field(LAYOUT, "cqe");

    private IbvCq() {
    }
}
