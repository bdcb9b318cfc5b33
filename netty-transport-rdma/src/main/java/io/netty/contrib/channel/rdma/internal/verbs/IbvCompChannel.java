package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_comp_channel}: a completion event channel (a pollable fd). */
final class IbvCompChannel {
    static final GroupLayout LAYOUT = struct("ibv_comp_channel",
            POINTER.withName("context"),
            U32.withName("fd"),
            U32.withName("refcnt"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle CONTEXT = field(LAYOUT, "context");
    static final VarHandle FD = field(LAYOUT, "fd");

    private IbvCompChannel() {
    }
}
