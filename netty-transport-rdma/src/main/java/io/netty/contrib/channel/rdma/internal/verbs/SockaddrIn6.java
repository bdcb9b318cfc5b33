package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct sockaddr_in6}: port and address in network byte order. */
final class SockaddrIn6 {
    static final GroupLayout LAYOUT = struct("sockaddr_in6",
            U16.withName("sin6_family"),
            BE16.withName("sin6_port"),
            BE32.withName("sin6_flowinfo"),
            bytes("sin6_addr", 16),
            U32.withName("sin6_scope_id"));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle SIN6_FAMILY = field(LAYOUT, "sin6_family");
    static final VarHandle SIN6_PORT = field(LAYOUT, "sin6_port");
    static final VarHandle SIN6_FLOWINFO = field(LAYOUT, "sin6_flowinfo");
    static final long SIN6_ADDR_OFFSET = offset(LAYOUT, "sin6_addr");
    static final VarHandle SIN6_SCOPE_ID = field(LAYOUT, "sin6_scope_id");

    private SockaddrIn6() {
    }
}
