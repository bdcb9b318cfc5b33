package io.netty.contrib.channel.rdma.testsuite;

import io.netty.bootstrap.Bootstrap;
import io.netty.bootstrap.ServerBootstrap;
import io.netty.channel.EventLoopGroup;
import io.netty.channel.MultiThreadIoEventLoopGroup;
import io.netty.contrib.channel.rdma.RdmaChannel;
import io.netty.contrib.channel.rdma.RdmaIoHandler;
import io.netty.contrib.channel.rdma.RdmaServerChannel;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapComboFactory;
import io.netty.testsuite.transport.TestsuitePermutation.BootstrapFactory;
import io.netty.util.concurrent.DefaultThreadFactory;

import java.util.List;

/**
 * Netty's socket testsuite on RDMA: server and client both {@link RdmaServerChannel} / {@link RdmaChannel} on
 * separate loop groups, as the epoll and io_uring transports run it. The module's surefire configuration
 * selects the software RDMA device ({@code -Dio.netty.contrib.rdma.libraryPath=bundled}); set the property to
 * another directory to run the same tests on the system's rdma-core. Classes that bind {@link TestAddress}
 * (overriding {@code newSocketAddress()}) also run on devices whose rdma_cm refuses loopback addresses.
 */
final class RdmaSocketTestPermutation {
    static final RdmaSocketTestPermutation INSTANCE = new RdmaSocketTestPermutation();

    final EventLoopGroup serverGroup = new MultiThreadIoEventLoopGroup(2,
            new DefaultThreadFactory("testsuite-rdma-server", true), RdmaIoHandler.newFactory());
    final EventLoopGroup clientGroup = new MultiThreadIoEventLoopGroup(2,
            new DefaultThreadFactory("testsuite-rdma-client", true), RdmaIoHandler.newFactory());

    private RdmaSocketTestPermutation() {
    }

    List<BootstrapComboFactory<ServerBootstrap, Bootstrap>> socket() {
        return List.of(new BootstrapComboFactory<>() {
            @Override
            public ServerBootstrap newServerInstance() {
                return new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class);
            }

            @Override
            public Bootstrap newClientInstance() {
                return new Bootstrap().group(clientGroup).channel(RdmaChannel.class);
            }
        });
    }

    List<BootstrapFactory<ServerBootstrap>> server() {
        return List.of(() -> new ServerBootstrap().group(serverGroup).channel(RdmaServerChannel.class));
    }

    List<BootstrapFactory<Bootstrap>> client() {
        return List.of(() -> new Bootstrap().group(clientGroup).channel(RdmaChannel.class));
    }
}
