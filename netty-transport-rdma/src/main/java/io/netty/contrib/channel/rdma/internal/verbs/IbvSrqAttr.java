package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_srq_attr}. */
final class IbvSrqAttr {
    static final GroupLayout LAYOUT = struct("ibv_srq_attr",
            U32.withName("max_wr"),
            U32.withName("max_sge"),
            U32.withName("srq_limit"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle MAX_WR = field(LAYOUT, "max_wr");
    static final VarHandle MAX_SGE = field(LAYOUT, "max_sge");
    static final VarHandle SRQ_LIMIT = field(LAYOUT, "srq_limit");

    private IbvSrqAttr() {
    }
}
