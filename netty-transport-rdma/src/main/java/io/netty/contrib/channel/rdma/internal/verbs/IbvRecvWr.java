package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_recv_wr}: a receive work request. */
final class IbvRecvWr {
    static final GroupLayout LAYOUT = struct("ibv_recv_wr",
            U64.withName("wr_id"),
            POINTER_BITS.withName("next"),
            POINTER_BITS.withName("sg_list"),
            U32.withName("num_sge"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle WR_ID = field(LAYOUT, "wr_id");
    static final VarHandle NEXT = field(LAYOUT, "next");
    static final VarHandle SG_LIST = field(LAYOUT, "sg_list");
    static final VarHandle NUM_SGE = field(LAYOUT, "num_sge");

    private IbvRecvWr() {
    }
}
