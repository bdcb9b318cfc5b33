package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct rdma_event_channel}: the rdma_cm event channel (a pollable fd). */
final class RdmaEventChannel {
    static final GroupLayout LAYOUT = struct("rdma_event_channel",
            U32.withName("fd"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle FD = field(LAYOUT, "fd");

    private RdmaEventChannel() {
    }
}
