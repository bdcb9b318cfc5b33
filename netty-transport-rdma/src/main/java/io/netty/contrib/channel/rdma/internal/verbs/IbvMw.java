package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct ibv_mw}: a memory window; {@code rkey} is the consumer's to keep current for type 2 windows. */
final class IbvMw {
    static final GroupLayout LAYOUT = struct("ibv_mw",
            POINTER.withName("context"),
            POINTER.withName("pd"),
            U32.withName("rkey"),
            U32.withName("handle"),
            U32.withName("type"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle CONTEXT = field(LAYOUT, "context");
    static final VarHandle PD = field(LAYOUT, "pd");
    static final VarHandle RKEY = field(LAYOUT, "rkey");
    static final VarHandle TYPE = field(LAYOUT, "type");

    private IbvMw() {
    }
}
