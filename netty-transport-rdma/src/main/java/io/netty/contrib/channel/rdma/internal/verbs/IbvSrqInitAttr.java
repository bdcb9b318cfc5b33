package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_srq_init_attr}: argument of {@code ibv_create_srq}. */
final class IbvSrqInitAttr {
    static final GroupLayout LAYOUT = struct("ibv_srq_init_attr",
            POINTER.withName("srq_context"),
            IbvSrqAttr.LAYOUT.withName("attr"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle ATTR_MAX_WR = field(LAYOUT, "attr.max_wr");
    static final VarHandle ATTR_MAX_SGE = field(LAYOUT, "attr.max_sge");
    static final VarHandle ATTR_SRQ_LIMIT = field(LAYOUT, "attr.srq_limit");

    private IbvSrqInitAttr() {
    }
}
