package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct sockaddr_storage}: room for any socket address. */
final class SockaddrStorage {
    static final GroupLayout LAYOUT = struct("sockaddr_storage",
            U16.withName("ss_family"),
            bytes("__ss_padding", 118),
            U64.withName("__ss_align"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle SS_FAMILY = field(LAYOUT, "ss_family");

    private SockaddrStorage() {
    }
}
