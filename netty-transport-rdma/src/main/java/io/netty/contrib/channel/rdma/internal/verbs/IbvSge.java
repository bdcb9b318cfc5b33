package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_sge}: one scatter/gather element. */
final class IbvSge {
    static final GroupLayout LAYOUT = struct("ibv_sge",
            U64.withName("addr"),
            U32.withName("length"),
            U32.withName("lkey"));
    static final long SIZE = LAYOUT.byteSize();
    static final long ADDR = offset(LAYOUT, "addr");
    static final long LENGTH = offset(LAYOUT, "length");
    static final long LKEY = offset(LAYOUT, "lkey");

    private IbvSge() {
    }
}
