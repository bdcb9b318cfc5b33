package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_srq}: a shared receive queue. */
final class IbvSrq {
    static final GroupLayout LAYOUT = struct("ibv_srq",
            POINTER.withName("context"),
            POINTER.withName("srq_context"),
            POINTER.withName("pd"),
            U32.withName("handle"),
            opaque("mutex", 40, 8),
            opaque("cond", 48, 8),
            U32.withName("events_completed"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle CONTEXT = field(LAYOUT, "context");

    private IbvSrq() {
    }
}
