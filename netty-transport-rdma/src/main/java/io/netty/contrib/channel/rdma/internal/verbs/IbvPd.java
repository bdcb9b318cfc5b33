package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_pd}: a protection domain. */
final class IbvPd {
    static final GroupLayout LAYOUT = struct("ibv_pd",
            POINTER.withName("context"),
            U32.withName("handle"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle CONTEXT = field(LAYOUT, "context");
    static final VarHandle HANDLE = field(LAYOUT, "handle");

    private IbvPd() {
    }
}
