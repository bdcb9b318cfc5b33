package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_global_route}: the GRH part of an address vector. */
final class IbvGlobalRoute {
    static final GroupLayout LAYOUT = struct("ibv_global_route",
            IbvGid.LAYOUT.withName("dgid"),
            U32.withName("flow_label"),
            U8.withName("sgid_index"),
            U8.withName("hop_limit"),
            U8.withName("traffic_class"));

    private IbvGlobalRoute() {
    }
}
