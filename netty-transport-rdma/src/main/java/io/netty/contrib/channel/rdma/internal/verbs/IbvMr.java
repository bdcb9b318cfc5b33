package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_mr}: a registered memory region. */
final class IbvMr {
    static final GroupLayout LAYOUT = struct("ibv_mr",
            POINTER.withName("context"),
            POINTER.withName("pd"),
            U64.withName("addr"),
            U64.withName("length"),
            U32.withName("handle"),
            U32.withName("lkey"),
            U32.withName("rkey"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle CONTEXT = field(LAYOUT, "context");
    static final VarHandle PD = field(LAYOUT, "pd");
    static final VarHandle ADDR = field(LAYOUT, "addr");
    static final VarHandle LENGTH = field(LAYOUT, "length");
    static final VarHandle LKEY = field(LAYOUT, "lkey");
    static final VarHandle RKEY = field(LAYOUT, "rkey");

    private IbvMr() {
    }
}
