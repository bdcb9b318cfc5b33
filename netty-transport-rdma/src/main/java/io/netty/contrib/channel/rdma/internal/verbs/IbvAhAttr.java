package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_ah_attr}: an address vector. */
final class IbvAhAttr {
    static final GroupLayout LAYOUT = struct("ibv_ah_attr",
            IbvGlobalRoute.LAYOUT.withName("grh"),
            U16.withName("dlid"),
            U8.withName("sl"),
            U8.withName("src_path_bits"),
            U8.withName("static_rate"),
            U8.withName("is_global"),
            U8.withName("port_num"));

    private IbvAhAttr() {
    }
}
