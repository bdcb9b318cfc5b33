package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.bootstrap.Bootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketShutdownOutputBySelfTest;

import java.util.List;

class EpollOnRdmaSocketShutdownOutputBySelfTest extends SocketShutdownOutputBySelfTest {
    @Override
    protected List<BootstrapFactory<Bootstrap>> newFactories() {
        return EpollOnRdmaSocketTestPermutation.INSTANCE.clientSocket();
    }
}
