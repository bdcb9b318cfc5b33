package io.netty.contrib.channel.rdma.testsuite.epoll;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketBufReleaseTest;

import java.util.List;

class EpollOnRdmaSocketBufReleaseTest extends SocketBufReleaseTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return EpollOnRdmaSocketTestPermutation.INSTANCE.socket();
    }
}
