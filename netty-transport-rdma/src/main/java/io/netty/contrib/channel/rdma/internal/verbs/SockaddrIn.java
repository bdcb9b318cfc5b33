package io.netty.contrib.channel.rdma.internal.verbs;

import java.lang.foreign.GroupLayout;
import java.lang.invoke.VarHandle;

import static io.netty.contrib.channel.rdma.internal.verbs.Layouts.*;

/** {@code struct sockaddr_in}: port and address in network byte order. */
final class SockaddrIn {
    static final GroupLayout LAYOUT = struct("sockaddr_in",
            U16.withName("sin_family"),
            BE16.withName("sin_port"),
            bytes("sin_addr", 4),
            bytes("sin_zero", 8));
    static final long SIZE = LAYOUT.byteSize();
    static final VarHandle SIN_FAMILY = field(LAYOUT, "sin_family");
    static final VarHandle SIN_PORT = field(LAYOUT, "sin_port");
    static final long SIN_ADDR_OFFSET = offset(LAYOUT, "sin_addr");

    private SockaddrIn() {
    }
}
