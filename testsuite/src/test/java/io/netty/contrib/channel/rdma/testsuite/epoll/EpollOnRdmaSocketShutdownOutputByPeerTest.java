package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.testsuite.transport.socket.SocketShutdownOutputByPeerTest;

import java.util.List;

class EpollOnRdmaSocketShutdownOutputByPeerTest extends SocketShutdownOutputByPeerTest {
    @Override
    protected List<BootstrapFactory<ServerBootstrap>> newFactories() {
        return EpollOnRdmaSocketTestPermutation.INSTANCE.serverSocket();
    }
}
