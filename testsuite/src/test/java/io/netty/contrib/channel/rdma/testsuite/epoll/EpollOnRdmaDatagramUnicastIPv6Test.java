package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.channel.socket.SocketProtocolFamily;

/** IPv6, as Netty's EpollDatagramUnicastIPv6Test. */
class EpollOnRdmaDatagramUnicastIPv6Test extends EpollOnRdmaDatagramUnicastTest {
    @Override
    protected SocketProtocolFamily socketProtocolFamily() {
        return SocketProtocolFamily.INET6;
    }
}
