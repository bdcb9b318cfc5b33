package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_context}: an open device; {@code ops} holds the data-path verbs. */
final class IbvContext {
    static final GroupLayout LAYOUT = struct("ibv_context",
            POINTER.withName("device"),
            IbvContextOps.LAYOUT.withName("ops"),
            U32.withName("cmd_fd"),
            U32.withName("async_fd"),
            U32.withName("num_comp_vectors"),
            opaque("mutex", 40, 8),
            POINTER.withName("abi_compat"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle DEVICE = field(LAYOUT, "device");
    static final VarHandle OPS_ALLOC_MW = field(LAYOUT, "ops.alloc_mw");
    static final VarHandle OPS_DEALLOC_MW = field(LAYOUT, "ops.dealloc_mw");
    static final VarHandle OPS_POLL_CQ = field(LAYOUT, "ops.poll_cq");
    static final VarHandle OPS_REQ_NOTIFY_CQ = field(LAYOUT, "ops.req_notify_cq");
    static final VarHandle OPS_POST_SRQ_RECV = field(LAYOUT, "ops.post_srq_recv");
    static final VarHandle OPS_POST_SEND = field(LAYOUT, "ops.post_send");
    static final VarHandle OPS_POST_RECV = field(LAYOUT, "ops.post_recv");
    static final VarHandle CMD_FD = field(LAYOUT, "cmd_fd");
    static final VarHandle ASYNC_FD = field(LAYOUT, "async_fd");
    static final VarHandle NUM_COMP_VECTORS = field(LAYOUT, "num_comp_vectors");

    private IbvContext() {
    }
}
