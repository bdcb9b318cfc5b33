package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.socket.SocketSslEchoTest;

import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.util.List;

class RdmaSslEchoTest extends SocketSslEchoTest {
    @Override
    protected List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> newFactories() {
        return RdmaSocketTestPermutation.INSTANCE.socket();
    }

    @Override
    protected SocketAddress newSocketAddress() {
        return new InetSocketAddress(TestAddress.get(), 0);
    }
}
