package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.DatagramUnicastInetTest;

import java.util.List;

/** IPv4, as Netty's EpollDatagramUnicastTest. */
class EpollOnRdmaDatagramUnicastTest extends DatagramUnicastInetTest {
    @Override
    protected List<BootstrapComboFactory<Bootstrap, Bootstrap>> newFactories() {
        return EpollOnRdmaSocketTestPermutation.INSTANCE.datagram(socketProtocolFamily());
    }
}
