package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_recv_wr}: a receive work request. */
final class IbvRecvWr {
    static final GroupLayout LAYOUT = struct("ibv_recv_wr",
            U64.withName("wr_id"),
            POINTER_BITS.withName("next"),
            POINTER_BITS.withName("sg_list"),
            U32.withName("num_sge"));
    static final long SIZE = LAYOUT.byteSize();
    static final long WR_ID = offset(LAYOUT, "wr_id");
    static final long NEXT = offset(LAYOUT, "next");
    static final long SG_LIST = offset(LAYOUT, "sg_list");
    static final long NUM_SGE = offset(LAYOUT, "num_sge");

    private IbvRecvWr() {
    }
}
