package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_device}: one entry of the device list. */
final class IbvDevice {
    static final GroupLayout LAYOUT = struct("ibv_device",
            opaque("_ops", 16, 8),
            U32.withName("node_type"),
            U32.withName("transport_type"),
            bytes("name", 64),
            bytes("dev_name", 64),
            bytes("dev_path", 256),
            bytes("ibdev_path", 256));
    static final long SIZE = LAYOUT.byteSize();
    static final long NAME_OFFSET = offset(LAYOUT, "name");
    static final VarHandle NODE_TYPE = field(LAYOUT, "node_type");
    static final VarHandle TRANSPORT_TYPE = field(LAYOUT, "transport_type");

    private IbvDevice() {
    }
}
