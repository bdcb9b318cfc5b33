package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.DatagramMulticastTest;

import java.util.List;

class EpollOnRdmaDatagramMulticastTest extends DatagramMulticastTest {
    @Override
    protected List<BootstrapComboFactory<Bootstrap, Bootstrap>> newFactories() {
        return EpollOnRdmaSocketTestPermutation.INSTANCE.datagram(socketProtocolFamily());
    }
}
