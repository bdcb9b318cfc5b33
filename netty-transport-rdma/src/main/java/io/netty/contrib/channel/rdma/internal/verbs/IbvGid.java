package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code union ibv_gid}: a 128-bit global identifier. */
final class IbvGid {
    static final GroupLayout LAYOUT = union("ibv_gid",
            bytes("raw", 16),
            struct("ibv_gid_global",
                    BE64.withName("subnet_prefix"),
                    BE64.withName("interface_id")).withName("global"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle GLOBAL_SUBNET_PREFIX = field(LAYOUT, "global.subnet_prefix");
    static final VarHandle GLOBAL_INTERFACE_ID = field(LAYOUT, "global.interface_id");

    private IbvGid() {
    }
}
